#!/usr/bin/env node
// Installs node_modules from the lockfile when they are missing or older than
// the lockfile, so `npm start` and `npm test` work on a fresh clone.
import { execSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const lock = 'package-lock.json';
const marker = 'node_modules/.package-lock.json';
const stale = !existsSync(marker) || (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs + 1000);
if (stale) {
  console.error('[tessera] installing dependencies from package-lock.json (npm ci)...');
  execSync('npm ci --no-audit --no-fund', { stdio: 'inherit' });
}
