import { type Progress, silentProgress } from '../functions/local/progress.js';

/** A one-line bar redrawn on stderr, at most every 100 ms. */
export function terminalProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return silentProgress;
  let phase = '';
  let last = 0;
  const draw = (text: string) => stream.write(`\r\x1b[2K${text}`);
  return {
    phase(name) {
      phase = name;
      draw(`${phase}...`);
    },
    update(done, total, unit) {
      const now = Date.now();
      if (now - last < 100 && done < total) return;
      last = now;
      const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - 40));
      const filled = total > 0 ? Math.min(width, Math.round((done / total) * width)) : 0;
      draw(`${phase.padEnd(8)} [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total} ${unit}`);
    },
    done() {
      draw('');
      stream.write('\r');
    },
  };
}
