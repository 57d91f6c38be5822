"""Figure `frame_one_cell`: CPU from a one-cell change in a 1,000-row table to the end of the
frame that shows it (composed and encoded for a terminal). `LaneTable.apply` against stock
`DataTable.update_cell`, both through `table_frame.py`'s own measure, not a copy of it.

    python -m tests.bench.fig_frame ROWS SAMPLES
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tests.bench import table_frame as tf
from tests.bench.common import emit


async def measure(rows: int, samples: int) -> dict[str, Any]:
    data = tf.make_rows(rows)
    # Warm imports and CSS parsing so neither table pays for them (as table_frame.main does).
    await tf.first_frame(tf.lane_table, tf.load_lane(tf.make_rows(10)))
    await tf.first_frame(tf.data_table, tf.load_data(tf.make_rows(10)))
    lane = await tf.frame_costs(tf.lane_table, tf.load_lane(data), tf.lane_one_cell, samples)
    data_table = await tf.frame_costs(tf.data_table, tf.load_data(data), tf.data_one_cell, samples)
    return {"rows": rows, "lane_table": lane, "data_table": data_table}


def main(argv: list[str]) -> None:
    emit(asyncio.run(measure(int(argv[0]), int(argv[1]))))


if __name__ == "__main__":
    main(sys.argv[1:])
