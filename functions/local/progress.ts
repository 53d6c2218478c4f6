/**
 * Progress on long work, as the runtime reports it (staging, fan-out, tiles settled in any worker process).
 * The CLI draws it as a bar on a terminal (cli/terminal-progress.ts); tests and benchmarks pass silentProgress.
 */
export interface Progress {
  phase(name: string): void;
  update(done: number, total: number, unit: string): void;
  done(): void;
}

export const silentProgress: Progress = { phase() {}, update() {}, done() {} };
