import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: more forks only fight over the emulators.
    maxWorkers: 2,
    reporters: ['default', './test/support/closing-line-reporter.ts'],
  },
});
