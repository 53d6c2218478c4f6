import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseCommand } from '../../../cli/commands/choose.js';
import { ALL_REGIONS } from '../../../shared/placement/catalog/index.js';
import { geoAreaOf } from '../../../shared/placement/cost-model.js';
import { PriceTableError, parsePriceTable } from '../../../shared/placement/price-table.js';
import { parseBytes } from '../../../shared/placement/workload.js';

// Issue 17's "done when": a 10 GB scene, 400 tiles of 20 s at 2 GB, 1,000 scenes a month, data in
// aws:eu-west-1. Every figure the command prints is checked against a hand calculation made here from
// the price files themselves (read from disk, not through the model), within 1 %.

const root = resolve(import.meta.dirname, '../../..');
// biome-ignore lint/suspicious/noExplicitAny: JSON read from disk and from the command's output; the assertions check its shape
type Json = Record<string, any>;
const PRICE_FILES: Record<string, Json> = Object.fromEntries(
  ['aws', 'gcp', 'azure'].map((c) => [c, JSON.parse(readFileSync(join(root, 'shared/placement/prices', `${c}.json`), 'utf8'))]),
);

/** USD per unit of a flat item: the region's own row, or the cloud's reference row. */
function unit(cloud: string, region: string, key: string): number {
  const file = PRICE_FILES[cloud] as Json;
  const item = (file.regions[region] ?? file.regions[file.reference])[key];
  return item.price / item.per;
}

/** A tiered item's cost for a monthly quantity, step by step. */
function tiered(cloud: string, region: string, key: string, quantity: number): number {
  const file = PRICE_FILES[cloud] as Json;
  const tiers = (file.regions[region] ?? file.regions[file.reference])[key].tiers as { upTo: number | null; price: number }[];
  let left = quantity;
  let from = 0;
  let cost = 0;
  for (const t of tiers) {
    const width = (t.upTo ?? Number.POSITIVE_INFINITY) - from;
    const take = Math.min(left, width);
    cost += take * t.price;
    left -= take;
    from = t.upTo ?? from;
    if (left <= 0) break;
  }
  return cost;
}

// The workload, by hand.
const N = 1000;
const TILES = 400;
const DUP = 0.01;
const SEC = 20;
const GB_MEM = 2;
const GIB = 2 ** 30;
const SCENE = 10 * GIB;
const tileJobs = N * TILES; // 400,000
const deliveries = tileJobs * (1 + DUP); // 404,000
const busyGbS = tileJobs * SEC * GB_MEM; // 16,000,000 GB-s
// Range GETs: a header read, plus ceil(25.6 MiB per tile / 16 MiB mean range) = 2 body ranges.
const gets = tileJobs * 3;
// PUTs: 400 tiles + the manifest and the mosaic + one LIST of the 400 keys, per scene.
const puts = N * (TILES + 2 + 1);
// Stored: one float32 band per pixel (10 GiB of two uint16 bands -> 10 GiB of float32), plus the VRT
// (400 B a tile) and the manifest (4 KiB), kept 30 days = one month.
const storedGb = (N * (SCENE + TILES * 400 + 4096)) / GIB;
const egressGb = (N * SCENE) / GIB; // 10,000 GB read from S3 in eu-west-1
const s3Get = (gets * unit('aws', 'eu-west-1', 'object-get')) as number;

interface Expected {
  cloud: string;
  region: string;
  plan: string;
  lines: Record<string, number>;
}

const EXPECTED: Expected[] = [
  {
    cloud: 'aws',
    region: 'eu-west-1',
    plan: 'Lambda',
    lines: {
      'Lambda arm64 compute': busyGbS * unit('aws', 'eu-west-1', 'lambda-arm64-gb-s'),
      'Lambda requests': deliveries * unit('aws', 'eu-west-1', 'lambda-requests'),
      // claim + commit per tile, a failed claim per duplicate
      'DynamoDB writes': (2 * tileJobs + tileJobs * DUP) * unit('aws', 'eu-west-1', 'dynamodb-write-units'),
      'S3 range GETs (source)': s3Get,
      'S3 conditional PUTs and LISTs': puts * unit('aws', 'eu-west-1', 'object-put'),
      'S3 storage of tiles and mosaic': storedGb * unit('aws', 'eu-west-1', 'object-storage'),
      // sends in batches of 10, a receive and a delete per delivery
      'SQS requests': (N * (TILES / 10) + 2 * deliveries) * unit('aws', 'eu-west-1', 'queue-requests'),
    },
  },
  {
    cloud: 'aws',
    region: 'eu-central-1',
    plan: 'Lambda',
    lines: {
      'Lambda arm64 compute': busyGbS * unit('aws', 'eu-central-1', 'lambda-arm64-gb-s'),
      'Lambda requests': deliveries * unit('aws', 'eu-central-1', 'lambda-requests'),
      'DynamoDB writes': (2 * tileJobs + tileJobs * DUP) * unit('aws', 'eu-central-1', 'dynamodb-write-units'),
      'S3 range GETs (source)': s3Get,
      'S3 conditional PUTs and LISTs': puts * unit('aws', 'eu-central-1', 'object-put'),
      'S3 storage of tiles and mosaic': storedGb * unit('aws', 'eu-central-1', 'object-storage'),
      'SQS requests': (N * (TILES / 10) + 2 * deliveries) * unit('aws', 'eu-central-1', 'queue-requests'),
      'inter-region source reads eu-west-1 to eu-central-1': egressGb * unit('aws', 'eu-west-1', 'inter-region'),
    },
  },
  {
    cloud: 'gcp',
    region: 'europe-west1',
    plan: 'Cloud Functions 2nd gen, event',
    lines: {
      // 2 GiB comes with 1 vCPU
      'Cloud Run functions CPU': tileJobs * SEC * 1 * unit('gcp', 'europe-west1', 'run-vcpu-s'),
      'Cloud Run functions memory': busyGbS * unit('gcp', 'europe-west1', 'run-gib-s'),
      'Cloud Run functions requests': deliveries * unit('gcp', 'europe-west1', 'run-requests'),
      'Firestore writes': (2 * tileJobs + tileJobs * DUP) * unit('gcp', 'europe-west1', 'firestore-writes'),
      'Firestore reads': (tileJobs + tileJobs * DUP) * unit('gcp', 'europe-west1', 'firestore-reads'),
      'Firestore deletes': tileJobs * unit('gcp', 'europe-west1', 'firestore-deletes'),
      'S3 range GETs (source)': s3Get,
      'GCS conditional PUTs and LISTs': puts * unit('gcp', 'europe-west1', 'object-put'),
      'GCS storage of tiles and mosaic': storedGb * unit('gcp', 'europe-west1', 'object-storage'),
      // 1000 billable bytes per publish and per push
      'Pub/Sub throughput': 1000 * (tileJobs + deliveries) * unit('gcp', 'europe-west1', 'pubsub-throughput'),
      'egress of source reads from aws eu-west-1': tiered('aws', 'eu-west-1', 'internet-egress', egressGb),
    },
  },
  {
    cloud: 'azure',
    region: 'northeurope',
    plan: 'Flex Consumption',
    lines: {
      'Flex Consumption on-demand compute': busyGbS * unit('azure', 'northeurope', 'flex-gb-s'),
      'Flex Consumption executions': deliveries * unit('azure', 'northeurope', 'flex-executions'),
      // insert, read + replace at commit, the sweep's delete; a failed insert and a read per duplicate
      'Table transactions': (4 * tileJobs + 2 * tileJobs * DUP) * unit('azure', 'northeurope', 'table-transactions'),
      'S3 range GETs (source)': s3Get,
      'Blob conditional PUTs and LISTs': puts * unit('azure', 'northeurope', 'object-put'),
      'Blob storage of tiles and mosaic': storedGb * unit('azure', 'northeurope', 'object-storage'),
      // a put per tile, a get and a delete per delivery
      'Queue operations': (tileJobs + 2 * deliveries) * unit('azure', 'northeurope', 'queue-operations'),
      'egress of source reads from aws eu-west-1': tiered('aws', 'eu-west-1', 'internet-egress', egressGb),
    },
  },
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-cost-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function chooseJson(...argv: string[]): Promise<Json> {
  let stdout = '';
  let stderr = '';
  const code = await chooseCommand([...argv, '--json'], { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), cwd: dir });
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout);
}

const DONE_WHEN = ['--data', 'aws:eu-west-1', '--scene-size', '10GB', '--tiles', '400', '--runtime', '20s', '--memory', '2GB'];
const MONTHLY = [...DONE_WHEN, '--scenes-per-month', '1000'];

function within1Percent(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs hand ${expected}`).toBeLessThanOrEqual(
    Math.max(0.01 * Math.abs(expected), 1e-6),
  );
}

describe('tessera choose > the money model reproduces a hand calculation from the price files', () => {
  let out: Json;
  beforeAll(async () => {
    out = await chooseJson(...MONTHLY);
  });

  it('states the workload it priced', () => {
    expect(out.workload).toMatchObject({ scenesPerMonth: 1000, sceneBytes: SCENE, tiles: 400, runtimeSec: 20, memoryMb: 2048 });
    expect(out.workload).toMatchObject({
      data: 'aws:eu-west-1',
      duplicateRate: 0.01,
      retentionDays: 30,
      freeTier: false,
      rangesPerTile: 3,
    });
  });

  it('shows an internet egress line on every choice outside AWS, and none on AWS', () => {
    const outside = out.choices.filter((c: Json) => c.cloud !== 'aws');
    expect(outside.length).toBeGreaterThan(20);
    for (const c of outside) {
      const egress = c.lines.find((l: Json) => l.item === 'egress of source reads from aws eu-west-1');
      expect(egress, `${c.cloud} ${c.region} ${c.plan}`).toBeDefined();
      within1Percent(egress.quantity, egressGb, `${c.region} egress GB`);
      within1Percent(egress.cost, tiered('aws', 'eu-west-1', 'internet-egress', egressGb), `${c.region} egress`);
    }
    for (const c of out.choices.filter((x: Json) => x.cloud === 'aws')) {
      expect(c.lines.some((l: Json) => l.item.startsWith('egress of'))).toBe(false);
    }
  });

  it.each(EXPECTED.map((e) => [`${e.cloud} ${e.region} ${e.plan}`, e] as const))('prices %s line by line', (_name, expected) => {
    const choice = out.choices.find((c: Json) => c.cloud === expected.cloud && c.region === expected.region && c.plan === expected.plan);
    expect(choice).toBeDefined();
    expect(choice.lines.map((l: Json) => l.item).sort()).toEqual(Object.keys(expected.lines).sort());
    for (const line of choice.lines) {
      within1Percent(line.cost, expected.lines[line.item] as number, line.item);
      within1Percent(line.quantity * line.unitPrice, line.cost, `${line.item} quantity x unit price`);
    }
    const month = Object.values(expected.lines).reduce((a, b) => a + b, 0);
    within1Percent(choice.costPerMonth, month, 'month');
    within1Percent(choice.costPerScene, month / N, 'scene');
  });

  it('makes the egress the largest line off AWS, several times the compute of 400 tiles', () => {
    const flex = out.choices.find((c: Json) => c.region === 'northeurope');
    const largest = flex.lines.reduce((a: Json, b: Json) => (b.cost > a.cost ? b : a));
    expect(largest.item).toBe('egress of source reads from aws eu-west-1');
    // $900 a month at $0.09/GB
    within1Percent(largest.cost, 900, 'egress');
  });

  it('ranks the data region first and the cheaper AWS regions before any other cloud at the default weight', () => {
    expect(out.choices[0]).toMatchObject({ cloud: 'aws', region: 'eu-west-1' });
    const firstOther = out.choices.findIndex((c: Json) => c.cloud !== 'aws');
    const costs = out.choices.slice(0, firstOther).map((c: Json) => c.costPerMonth);
    expect(Math.max(...costs)).toBeLessThan(out.choices[firstOther].costPerMonth);
  });
});

describe('tessera choose > workload inputs', () => {
  it('reads the same workload from a YAML file, a JSON file and the flags', async () => {
    const yamlPath = join(dir, 'w.yaml');
    await writeFile(
      yamlPath,
      'data: aws:eu-west-1\nsceneSize: 10GB\ntiles: 400\nruntime: 20s\nmemory: 2GB\nscenes-per-month: 1000\nduplicate-rate: 0.01\nretention: 30\n',
    );
    const jsonPath = join(dir, 'w.json');
    await writeFile(
      jsonPath,
      JSON.stringify({ data: 'aws:eu-west-1', sceneBytes: SCENE, tiles: 400, runtime: 20, memory: 2048, scenesPerMonth: 1000 }),
    );
    const flags = await chooseJson(...MONTHLY);
    const fromYaml = await chooseJson('--workload', yamlPath);
    const fromJson = await chooseJson('--workload', jsonPath);
    expect(fromYaml).toEqual(flags);
    expect(fromJson).toEqual(flags);
    // Flags override the file.
    const fewer = await chooseJson('--workload', yamlPath, '--scenes-per-month', '10');
    expect(fewer.workload.scenesPerMonth).toBe(10);
  });

  it('counts tiles from the grid and the tile size', async () => {
    const out = await chooseJson(
      '--data',
      'gcp:europe-west1',
      '--runtime',
      '20s',
      '--memory',
      '2GB',
      '--width',
      '10980',
      '--height',
      '10980',
      '--bands',
      '4',
      '--dtype',
      'uint16',
      '--tile-px',
      '512',
    );
    expect(out.workload).toMatchObject({
      sceneBytes: 10980 * 10980 * 4 * 2,
      tiles: 22 * 22,
      grid: { width: 10980, bands: 4, dtype: 'uint16' },
    });
    expect(out.choices[0]).toMatchObject({ cloud: 'gcp', region: 'europe-west1' });
  });

  it("prices coordinates with a cloud as data in that cloud's nearest region", async () => {
    const out = await chooseJson(
      '--data',
      'aws:53.3,-6.3',
      '--scene-size',
      '10GB',
      '--tiles',
      '400',
      '--runtime',
      '20s',
      '--memory',
      '2GB',
    );
    expect(out.workload.data).toEqual({ lat: 53.3, lon: -6.3, pricedAs: 'aws:eu-west-1' });
    const northeurope = out.choices.find((c: Json) => c.region === 'northeurope');
    const egress = northeurope.lines.find((l: Json) => l.item === 'egress of source reads from aws eu-west-1');
    within1Percent(egress.cost, 10 * 0.09, 'one scene of egress');
  });

  it('applies the free tiers only when asked', async () => {
    const list = await chooseJson(...DONE_WHEN, '--clouds', 'aws');
    const free = await chooseJson(...DONE_WHEN, '--clouds', 'aws', '--free-tier');
    const compute = (o: Json) => o.choices[0].lines.find((l: Json) => l.item === 'Lambda arm64 compute')?.cost ?? 0;
    // One scene: 400 x 20 s x 2 GB = 16,000 GB-s, inside the 400,000 GB-s free tier.
    within1Percent(compute(list), 16_000 * unit('aws', 'eu-west-1', 'lambda-arm64-gb-s'), 'list compute');
    expect(compute(free)).toBe(0);
    expect(free.choices[0].notes).toContain('free tiers applied as if this workload had them to itself');
  });

  it('prices the return of outputs when they must live elsewhere', async () => {
    const out = await chooseJson(...MONTHLY, '--outputs', 'gcp:europe-west1', '--clouds', 'aws', '--limit', '1');
    const line = out.choices[0].lines.find((l: Json) => l.item === 'egress of outputs from aws eu-west-1');
    within1Percent(line.cost, tiered('aws', 'eu-west-1', 'internet-egress', storedGb), 'outputs egress');
    expect(out.choices[0].lines.map((l: Json) => l.item)).toContain('GCS storage of tiles and mosaic');
  });

  it.each([
    [['--data', 'aws:westeurope'], /westeurope is a azure region; write azure:westeurope/],
    [['--data', 'ibm:eu-de'], /--data takes CLOUD:REGION/],
    [['--data', 'aws:eu-west-1', '--scene-size', 'ten'], /scene size "ten" is not a size/],
    [['--data', 'aws:eu-west-1', '--scene-size', '1GB', '--tile-px', '256'], /a tile size needs the grid/],
    [['--data', 'aws:eu-west-1', '--width', '100'], /the grid needs --width, --height, --bands and --dtype together/],
    [['--data', 'aws:eu-west-1', '--duplicate-rate', '2'], /duplicate rate must be within 0..1/],
    [['--data', 'aws:eu-west-1', '--outputs', 'gcp:eu-west-1'], /eu-west-1 is a aws region/],
    [['eu-west-1', '--data', 'aws:eu-west-1'], /not both/],
  ])('refuses %j with exit status 2', async (argv, message) => {
    let stderr = '';
    const code = await chooseCommand([...argv, '--runtime', '20s', '--memory', '2GB'], {
      stdout: () => {},
      stderr: (s) => (stderr += s),
      cwd: dir,
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  });

  it.each([
    ['an unknown field', 'scenes: 1000\n', /unknown field "scenes"; the fields are region, lat, lon, data, runtime/],
    ['broken YAML', 'data: [aws\n', /is not valid YAML/],
    ['a list', '- data: aws:eu-west-1\n', /must hold a map of fields/],
    ['a nested value', 'tiles: { n: 400 }\n', /tiles must be a string or a number/],
  ])('refuses a workload file with %s, with exit status 2', async (_what, text, message) => {
    const path = join(dir, `bad-${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(path, text);
    let stderr = '';
    const code = await chooseCommand(['--workload', path, '--runtime', '20s', '--memory', '2GB'], {
      stdout: () => {},
      stderr: (s) => (stderr += s),
      cwd: dir,
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
  });

  it('reads sizes as the clouds bill them (1 GB = 2^30 bytes)', () => {
    expect(parseBytes('10GB')).toBe(10 * GIB);
    expect(parseBytes('512 MiB')).toBe(512 * 2 ** 20);
    expect(parseBytes('1.5TB')).toBe(1.5 * 2 ** 40);
    expect(parseBytes('1000')).toBe(1000);
  });
});

describe('price tables', () => {
  it('give every figure a source with a URL and the date it was read', () => {
    for (const [cloud, file] of Object.entries(PRICE_FILES)) {
      const table = parsePriceTable(file, `${cloud}.json`);
      for (const s of Object.values(table.sources)) {
        expect(s.url).toMatch(/^https:\/\//);
        expect(s.read).toMatch(/^2026-12-01/);
      }
    }
  });

  it('refuse a file whose item names no source, or whose rows lack an item', () => {
    const aws = structuredClone(PRICE_FILES.aws) as Json;
    aws.regions['eu-west-1']['object-get'].source = 'nowhere';
    expect(() => parsePriceTable(aws, 'aws.json')).toThrow(PriceTableError);
    const gcp = structuredClone(PRICE_FILES.gcp) as Json;
    delete gcp.regions['europe-west1']['run-gib-s'];
    expect(() => parsePriceTable(gcp, 'gcp.json')).toThrow(/regions.europe-west1 lacks run-gib-s/);
  });

  it('place every catalog region in the area its code says', () => {
    const byPrefix: [RegExp, string][] = [
      [/^(eu-|europe-)/, 'europe'],
      [/^(us-|ca-|northamerica-|mx-)/, 'north-america'],
      [/^(sa-|southamerica-)/, 'south-america'],
      [/^(ap-southeast-[246]|australia-)/, 'oceania'],
      [/^(ap-|asia-)/, 'asia'],
      [/^(me-|af-|il-|africa-)/, 'middle-east-africa'],
    ];
    for (const r of ALL_REGIONS) {
      const rule = byPrefix.find(([re]) => re.test(r.code));
      if (rule) expect(geoAreaOf(r), r.code).toBe(rule[1]);
    }
    expect(geoAreaOf({ lat: 53.35, lon: -6.26 })).toBe('europe');
    expect(geoAreaOf({ lat: -33.87, lon: 151.21 })).toBe('oceania');
  });
});
