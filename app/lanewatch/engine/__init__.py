"""The engine: one owner of the model, fed by the walks, the watchdog tail, the process probe and
kernel attribution; run in-process or in a process of its own."""
