#!/usr/bin/env node
// Installs every local emulator the tests need into project-local folders
// (.venv for moto, .tools/bin for fake-gcs-server). Idempotent and quick when
// everything is already there. See docs/emulators.md.
import { install as installAws } from './emulators/aws.mjs';
import { install as installAzure } from './emulators/azure.mjs';
import { install as installChromium } from './emulators/chromium.mjs';
import { install as installGcp } from './emulators/gcp.mjs';
import { install as installGdal } from './emulators/gdal.mjs';
// go-pmtiles (Go module proxy): `pmtiles verify` checks the PMTiles archives Tessera writes.
import { install as installGoPmtiles } from './emulators/pmtiles.mjs';
import { install as installPostgres } from './emulators/postgres.mjs';
// The real Pulumi CLI and language host (vendor/pulumi/) for the real-engine test.
import { install as installPulumi } from './emulators/pulumi.mjs';
// clang, lld, wasi-libc, glibc's arm64 headers: the rebuilds of shared/raster/libdeflate.wasm and of the native addons
// the unit tests compare with the committed ones.
import { install as installWasmToolchain } from './emulators/wasm-toolchain.mjs';
// The arm64 Node of the pinned 24.x (npm) and Debian's qemu-user: the linux-arm64 libdeflate addon's identity check.
import { install as installArm64Node } from './native-node-arm64.mjs';
// sharp's prebuilt libvips for the function archives' platforms (linux-x64, and Lambda's linux-arm64), from npm.
import { install as installSharpNative } from './native-sharp.mjs';

const started = Date.now();
for (const [name, install] of [
  ['aws', installAws],
  ['gcp', installGcp],
  ['azure', installAzure],
  ['postgres', installPostgres],
  ['gdal', installGdal],
  ['go-pmtiles', installGoPmtiles],
  ['chromium', installChromium],
  ['pulumi', installPulumi],
  ['sharp-native', installSharpNative],
  ['wasm-toolchain', installWasmToolchain],
  ['arm64-node', installArm64Node],
]) {
  try {
    await install();
  } catch (error) {
    console.error(`[emulators] installing the ${name} test prerequisites failed: ${error instanceof Error ? error.message : error}`);
    process.exit(1);
  }
}
console.error(`[emulators] ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
