"""Run a command and report what it cost: wall time, CPU time and peak RSS of it and every
process it waited for (getrusage(RUSAGE_CHILDREN): a Node parent reaps its worker processes,
a multiprocessing pool its workers, so theirs are included). The command's output passes
through. Input: argv[1] = JSON {"cmd": [...], "out": path}; writes one JSON object to `out`.
ru_maxrss is the largest single process's peak (KiB), not a sum: the benchmark samples the
process tree's total beside it.
"""
import json
import resource
import subprocess
import sys
import time

spec = json.loads(sys.argv[1])
started = time.perf_counter()
code = subprocess.call(spec["cmd"])
wall = time.perf_counter() - started
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(spec["out"], "w") as f:
    json.dump({"exitCode": code, "wallSec": wall, "userSec": ru.ru_utime, "sysSec": ru.ru_stime, "maxRssKb": ru.ru_maxrss}, f)
sys.exit(code)
