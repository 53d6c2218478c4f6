import { describe, expect, it } from 'vitest';
import { type BenchReport, renderMarkdown } from '../../../bench/lib/report.js';

const report = (over: Partial<BenchReport> = {}): BenchReport => ({
  generatedAt: '2026-12-02T20:00:00.000Z',
  mode: 'full',
  command: 'npm run bench',
  durationSec: 75,
  machine: {
    cpu: 'a CPU',
    cores: 2,
    memoryGb: 24,
    node: 'v24.0.0',
    platform: 'linux x64',
    loadAverageAtStart: [0.1, 0.2, 0.3],
    gdal: undefined,
    pinnedToOneCore: true,
    commit: 'abc1234',
  },
  loadAverageAtEnd: [0.4, 0.5, 0.6],
  rows: [
    {
      section: '8 streams',
      metric: 'records per second',
      backend: 'local',
      target: '>= 20x the baseline',
      measured: '1 vs 2',
      ratio: '0.5x',
      status: 'MISS',
      note: 'why',
    },
  ],
  sections: { streams: { durationSec: 75, broken: [], details: {} } },
  ...over,
});

describe('the benchmark report', () => {
  it('says in its title when --only left sections out, and not otherwise', () => {
    expect(renderMarkdown(report()).split('\n')[0]).toBe('# Benchmark results (full)');
    expect(renderMarkdown(report({ only: ['streams'] })).split('\n')[0]).toBe('# Benchmark results (full, only streams)');
    expect(renderMarkdown(report({ mode: 'smoke', only: ['streams', 'pyramid'] })).split('\n')[0]).toBe(
      '# Benchmark results (smoke, only streams, pyramid)',
    );
  });

  it('lists a missed target with its note', () => {
    expect(renderMarkdown(report())).toContain('- **8 streams / records per second (local)**: 1 vs 2 against >= 20x the baseline. why');
  });
});
