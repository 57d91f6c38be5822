"""A net-fenced lane's resolver file (`runner/netdns.py`): the host's, with its loopback
nameservers replaced by slirp4netns's 10.0.2.3, or None where the host's serves as it is. The
files are real, under tmp_path; the lane's use of it is tests/processes/test_netdns.py."""

from __future__ import annotations

from pathlib import Path

from lanewatch.runner import netdns
from lanewatch.runner.netdns import SLIRP_DNS, host_text, lane_text

SYSTEMD_STUB = """\
# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).
nameserver 127.0.0.53
options edns0 trust-ad
search lan corp.example
"""


def _body(text: str | None) -> list[str]:
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == netdns.HEADER
    return lines[1:]


def test_systemd_resolveds_stub_becomes_slirps_forwarder_with_search_and_options_kept() -> None:
    assert _body(lane_text(SYSTEMD_STUB)) == [
        "# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).",
        f"nameserver {SLIRP_DNS}",
        "options edns0 trust-ad",
        "search lan corp.example",
    ]


def test_a_host_without_a_loopback_resolver_keeps_its_file() -> None:
    assert lane_text("nameserver 10.255.255.53\nsearch example\n") is None
    assert lane_text("nameserver 192.0.2.1\nnameserver 2001:db8::1\n") is None


def test_loopback_nameservers_are_replaced_once_where_the_first_stood() -> None:
    host = "nameserver 192.0.2.1\nnameserver 127.0.0.1\nnameserver ::1\nnameserver 192.0.2.2\n"
    assert _body(lane_text(host)) == [
        "nameserver 192.0.2.1",
        f"nameserver {SLIRP_DNS}",
        "nameserver 192.0.2.2",
    ]


def test_no_nameserver_means_the_local_host_and_so_slirps_forwarder() -> None:
    assert _body(lane_text("search lan\n")) == ["search lan", f"nameserver {SLIRP_DNS}"]
    assert _body(lane_text("")) == [f"nameserver {SLIRP_DNS}"]


def test_words_that_are_no_address_are_kept_as_the_host_wrote_them() -> None:
    host = "nameserver not-an-address\n  nameserver\t127.0.0.53  \nnameserver fe80::1%eth0\n"
    assert _body(lane_text(host)) == [
        "nameserver not-an-address",
        f"nameserver {SLIRP_DNS}",
        "nameserver fe80::1%eth0",
    ]


def test_the_host_file_is_read_from_the_override_and_refused_when_unreadable_or_huge(
    tmp_path: Path,
) -> None:
    given = tmp_path / "resolv.conf"
    given.write_bytes(b"nameserver 127.0.0.53\nsearch caf\xe9\n")
    text = host_text({netdns.ENV_HOST_RESOLV: str(given)})
    assert text is not None
    lane = lane_text(text)
    assert lane is not None
    assert lane.encode("utf-8", "surrogateescape").endswith(b"search caf\xe9\n")
    assert host_text({netdns.ENV_HOST_RESOLV: str(tmp_path / "missing")}) is None
    huge = tmp_path / "huge"
    huge.write_bytes(b"#" * (netdns.MAX_BYTES + 1))
    assert host_text({netdns.ENV_HOST_RESOLV: str(huge)}) is None
