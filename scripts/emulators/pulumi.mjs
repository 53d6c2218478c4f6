// The real Pulumi CLI and its Node.js language host, for the real-engine test (test/infra/pulumi-engine.test.ts).
// They are vendored gzipped in vendor/pulumi/ (provenance in its README): the language host is not served by the Go
// module proxy, the only source CI can reach, and no other registry carries either. install() unpacks them into
// .tools/pulumi/bin and checks each against vendor/pulumi/SHA256SUMS; a stamp of those sums makes later runs a no-op.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const PULUMI_VERSION = 'v3.274.1';
export const PULUMI_LANGUAGE_NODEJS_VERSION = 'v3.259.0';
export const PULUMI_VENDOR_DIR = join(repo, 'vendor', 'pulumi');
/** Put this first on PATH: `pulumi`, and `pulumi-language-nodejs`, which the CLI looks up on PATH. */
export const PULUMI_BIN_DIR = join(repo, '.tools', 'pulumi', 'bin');

/** Binary name -> its gzipped file in vendor/pulumi/. */
const BINARIES = {
  pulumi: `pulumi-${PULUMI_VERSION}-linux-x64.gz`,
  'pulumi-language-nodejs': `pulumi-language-nodejs-${PULUMI_LANGUAGE_NODEJS_VERSION}-linux-x64.gz`,
};
/** Written last, holding the SHA256SUMS the binaries were checked against. */
const STAMP_NAME = '.sha256sums';

/** `<sha256>  <name>` lines -> name -> sha256. */
function expectedSums(text) {
  const sums = new Map();
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{64}) [ *](\S+)$/.exec(line.trim());
    if (m) sums.set(m[2], m[1]);
  }
  return sums;
}

/** Gunzips one vendored binary to a temporary file beside its destination, hashing it on the way; returns the hash. */
async function unpack(gz, tmp) {
  const hash = createHash('sha256');
  const tee = new Transform({
    transform(chunk, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(createReadStream(gz), createGunzip(), tee, createWriteStream(tmp, { mode: 0o755 }));
  return hash.digest('hex');
}

/**
 * Unpacks and checks the binaries unless the stamp says they already are. `vendorDir` and `binDir` are for the
 * test that a damaged file is refused; `npm test`'s pretest uses the defaults.
 */
export async function install({ vendorDir = PULUMI_VENDOR_DIR, binDir = PULUMI_BIN_DIR } = {}) {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `the vendored Pulumi CLI (vendor/pulumi/) is linux-x64 only, this is ${process.platform}-${process.arch}: ` +
        `the real-engine test needs pulumi ${PULUMI_VERSION} and pulumi-language-nodejs in ${binDir}`,
    );
  }
  const stamp = join(binDir, STAMP_NAME);
  const sumsText = readFileSync(join(vendorDir, 'SHA256SUMS'), 'utf8');
  const allThere = Object.keys(BINARIES).every((name) => existsSync(join(binDir, name)));
  if (allThere && existsSync(stamp) && readFileSync(stamp, 'utf8') === sumsText) return;
  const sums = expectedSums(sumsText);
  mkdirSync(binDir, { recursive: true });
  rmSync(stamp, { force: true });
  console.error(`[emulators] unpacking the Pulumi CLI ${PULUMI_VERSION} and its Node.js language host into ${binDir}`);
  for (const [name, file] of Object.entries(BINARIES)) {
    const expected = sums.get(name);
    if (!expected) throw new Error(`${join(vendorDir, 'SHA256SUMS')} has no line for ${name}`);
    const dest = join(binDir, name);
    const tmp = `${dest}.partial`;
    const actual = await unpack(join(vendorDir, file), tmp);
    if (actual !== expected) {
      rmSync(tmp, { force: true });
      throw new Error(
        `${join(vendorDir, file)} unpacks to sha256 ${actual}, but SHA256SUMS says ${expected} for ${name}: ` +
          'the file is damaged or was replaced (vendor/pulumi/README.md says where it comes from)',
      );
    }
    chmodSync(tmp, 0o755);
    renameSync(tmp, dest);
  }
  writeFileSync(stamp, sumsText);
}
