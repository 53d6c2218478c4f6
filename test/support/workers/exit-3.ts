// Not a worker: exits 3 at once (the worker-process test's broken child).
process.exit(3);
