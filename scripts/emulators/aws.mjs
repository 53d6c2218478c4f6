// Installs the AWS emulators the tests use (see docs/aws.md and ../../test/support/emulators/aws.ts):
// - DynamoDB Local (AWS's own jar), shipped inside the npm dev dependency `amplify-dynamodb-simulator`;
//   nothing to download, we only check that the jar, its native libraries and a Java runtime are there.
// - moto server (S3 + SQS), pip-installed at a pinned version into the project-local virtualenv `.venv/`.
// Idempotent: when the pinned moto is already in .venv this returns in well under a second.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** moto >= 5.1 enforces PutObject If-None-Match / If-Match; 5.2.5 is the version the guard test was run against. */
export const MOTO_VERSION = '5.2.5';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const venvDir = join(root, '.venv');
const bin = (name) => join(venvDir, process.platform === 'win32' ? 'Scripts' : 'bin', name);

/** Where the DynamoDB Local jar and its native libraries are (inside node_modules). */
export function dynamoDbLocalPaths() {
  const require = createRequire(join(root, 'package.json'));
  const pkg = dirname(require.resolve('amplify-dynamodb-simulator/package.json'));
  const dir = join(pkg, 'emulator');
  return { dir, jar: join(dir, 'DynamoDBLocal.jar'), lib: join(dir, 'DynamoDBLocal_lib') };
}

/** The moto_server executable inside the project virtualenv. */
export function motoServerPath() {
  return bin('moto_server');
}

function installedMotoVersion() {
  if (!existsSync(bin('python')) || !existsSync(motoServerPath())) return undefined;
  const r = spawnSync(bin('python'), ['-c', 'import importlib.metadata as m; print(m.version("moto")); import flask, flask_cors'], {
    encoding: 'utf8',
  });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

export async function install() {
  const ddb = dynamoDbLocalPaths();
  if (!existsSync(ddb.jar) || !existsSync(ddb.lib)) {
    throw new Error(
      `DynamoDB Local is missing at ${ddb.dir}: the dev dependency amplify-dynamodb-simulator ships it; run \`npm ci\` (do not install with --omit=dev)`,
    );
  }
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.status !== 0) {
    throw new Error(
      'DynamoDB Local needs a Java runtime (17 or later) on PATH: install one, e.g. `apt-get install -y openjdk-17-jre-headless`',
    );
  }

  if (installedMotoVersion() === MOTO_VERSION) return;
  if (!existsSync(bin('python'))) {
    console.error(`[emulators] creating the virtualenv ${venvDir}`);
    const python = process.env.PYTHON ?? 'python3';
    const r = spawnSync(python, ['-m', 'venv', venvDir], { stdio: 'inherit' });
    if (r.status !== 0) {
      throw new Error(
        `${python} -m venv ${venvDir} failed: moto needs Python 3.9+ with the venv module (Debian: apt-get install -y python3-venv)`,
      );
    }
  }
  console.error(`[emulators] installing moto[server]==${MOTO_VERSION} into ${venvDir}`);
  execFileSync(bin('python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', `moto[server]==${MOTO_VERSION}`], {
    stdio: 'inherit',
  });
  const got = installedMotoVersion();
  if (got !== MOTO_VERSION) throw new Error(`moto ${MOTO_VERSION} did not install into ${venvDir} (found ${got ?? 'nothing'})`);
}
