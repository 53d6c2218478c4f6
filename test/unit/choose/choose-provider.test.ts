import { describe, expect, it } from 'vitest';
import { CEILINGS, resolveLease } from '../../../shared/domain/ceilings.js';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import {
  type Cloud,
  findRegion,
  InvalidCoordinatesError,
  type Region,
  UnknownRegionError,
} from '../../../shared/placement/catalog/index.js';
import { type ChooseRequest, chooseProvider, DEFAULT_COST_WEIGHT } from '../../../shared/placement/choose-provider.js';

const MIN = 60;
const GB = 1024;

function request(over: Partial<ChooseRequest> = {}): ChooseRequest {
  return { data: { kind: 'region', code: 'eu-west-1' }, runtimeSec: 5 * MIN, memoryMb: 1 * GB, trigger: 'event', ...over };
}

const at = (lat: number, lon: number) => ({ kind: 'coordinates', lat, lon }) as const;
const inRegion = (code: string) => ({ kind: 'region', code }) as const;

describe('chooseProvider > which providers can run a job', () => {
  it.each<{ name: string; req: Partial<ChooseRequest>; clouds: Cloud[]; platforms: string[] }>([
    {
      name: 'a 5 min event job fits every provider',
      req: { runtimeSec: 5 * MIN },
      clouds: ['aws', 'azure', 'gcp'],
      platforms: ['aws-lambda', 'azure-consumption', 'azure-flex', 'gcf2-event'],
    },
    {
      name: 'a 12 min event job leaves out GCF events and Azure Consumption',
      req: { runtimeSec: 12 * MIN },
      clouds: ['aws', 'azure'],
      platforms: ['aws-lambda', 'azure-flex'],
    },
    {
      name: 'a 40 min event job fits only Azure Flex Consumption',
      req: { runtimeSec: 40 * MIN },
      clouds: ['azure'],
      platforms: ['azure-flex'],
    },
    {
      name: 'a 40 min HTTP job fits only Cloud Functions HTTP (Azure answers HTTP within 230 s)',
      req: { runtimeSec: 40 * MIN, trigger: 'http' },
      clouds: ['gcp'],
      platforms: ['gcf2-http'],
    },
    {
      name: 'a 70 min event job fits only Azure Flex Consumption (no ceiling)',
      req: { runtimeSec: 70 * MIN },
      clouds: ['azure'],
      platforms: ['azure-flex'],
    },
    { name: 'a 70 min HTTP job fits no provider', req: { runtimeSec: 70 * MIN, trigger: 'http' }, clouds: [], platforms: [] },
    {
      name: 'a 3 GB 5 min job leaves out Azure Consumption (1.5 GB)',
      req: { memoryMb: 3 * GB },
      clouds: ['aws', 'azure', 'gcp'],
      platforms: ['aws-lambda', 'azure-flex', 'gcf2-event'],
    },
    { name: 'a 12 GB job fits only Cloud Functions (32 GB)', req: { memoryMb: 12 * GB }, clouds: ['gcp'], platforms: ['gcf2-event'] },
    {
      name: 'a 40 min job on aws and gcp only fits nothing',
      req: { runtimeSec: 40 * MIN, clouds: ['aws', 'gcp'] },
      clouds: [],
      platforms: [],
    },
  ])('$name', ({ req, clouds, platforms }) => {
    const result = chooseProvider(request(req));
    expect([...new Set(result.choices.map((c) => c.cloud))].sort()).toEqual(clouds);
    expect([...new Set(result.choices.map((c) => c.platform))].sort()).toEqual(platforms);
  });

  it('never proposes a region that lacks the platform or its claim store', () => {
    const { choices } = chooseProvider(request({ runtimeSec: 40 * MIN }));
    expect(choices.length).toBeGreaterThan(0);
    for (const c of choices) {
      expect(c.region.cloud).toBe(c.cloud);
      if (c.region.cloud === 'azure') {
        expect(c.region.offers.flex).not.toBe('no');
        expect(c.region.offers.tableStorage).not.toBe('no');
      }
    }
    expect(choices.map((c) => c.region.code)).not.toContain('francesouth');
  });
});

describe('chooseProvider > rejection reasons', () => {
  it.each<{ name: string; req: Partial<ChooseRequest>; reason: string }>([
    {
      name: 'Azure Consumption refuses a 12 min job and points to Flex',
      req: { runtimeSec: 12 * MIN },
      reason: 'Azure Functions Consumption: 12 min job exceeds the 10 min ceiling; use Flex Consumption',
    },
    { name: 'Lambda refuses a 20 min job', req: { runtimeSec: 20 * MIN }, reason: 'AWS Lambda: 20 min job exceeds the 15 min ceiling' },
    {
      name: 'GCF event functions refuse a 10 min job and point to HTTP',
      req: { runtimeSec: 10 * MIN },
      reason:
        'Cloud Functions 2nd gen (event trigger): 10 min job exceeds the 9 min ceiling; use --trigger http (Cloud Functions 2nd gen, HTTP, 1 h ceiling)',
    },
    { name: 'Lambda refuses 12 GB', req: { memoryMb: 12 * GB }, reason: 'AWS Lambda: 12 GB peak memory exceeds the 10 GB limit' },
    {
      name: 'Azure Consumption refuses 2 GB and points to Flex',
      req: { memoryMb: 2 * GB },
      reason: 'Azure Functions Consumption: 2 GB peak memory exceeds the 1,536 MB limit; use Flex Consumption',
    },
    {
      name: 'Azure refuses an HTTP job longer than 230 s',
      req: { runtimeSec: 5 * MIN, trigger: 'http' },
      reason:
        'Azure Functions Flex Consumption: an HTTP-triggered execution must answer within 230 s; a 5 min job needs --trigger event (queue trigger)',
    },
    {
      name: 'Premium is named as able but not deployable',
      req: { runtimeSec: 40 * MIN },
      reason:
        "Azure Functions Premium could run this job, but Tessera's infra does not deploy the Premium plan yet (it needs an Azure Files content share); use Flex Consumption",
    },
  ])('$name', ({ req, reason }) => {
    const result = chooseProvider(request(req));
    expect(result.rejections.map((r) => r.reason)).toContain(reason);
  });

  it('says when the data region lacks a plan, and names the nearest region that has it', () => {
    const result = chooseProvider(request({ data: inRegion('francesouth'), runtimeSec: 40 * MIN }));
    expect(result.rejections).toContainEqual({
      cloud: 'azure',
      platform: 'azure-flex',
      region: 'francesouth',
      reason:
        'Azure Functions Flex Consumption is not offered in francesouth (per the catalog); nearest region with it: francecentral (283 km)',
    });
    expect(result.choices[0]?.region.code).toBe('francecentral');
  });

  it('refuses nothing for a job every platform can run, apart from the undeployable plan', () => {
    const result = chooseProvider(request({ runtimeSec: 2 * MIN, memoryMb: 512 }));
    expect(result.rejections.map((r) => r.platform)).toEqual(['azure-premium']);
  });
});

describe('chooseProvider > ranking', () => {
  it.each<[string, Cloud, string]>([
    ['eu-west-1', 'aws', 'eu-west-1'],
    ['europe-west1', 'gcp', 'europe-west1'],
    ['westeurope', 'azure', 'westeurope'],
    ['ap-southeast-2', 'aws', 'ap-southeast-2'],
  ])('puts the data region %s first on its own cloud', (code, cloud, first) => {
    const { choices } = chooseProvider(request({ data: inRegion(code), runtimeSec: 5 * MIN }));
    expect(choices[0]).toMatchObject({ cloud, sameRegion: true, distanceKm: 0 });
    expect(choices[0]?.region.code).toBe(first);
    expect(choices.filter((c) => c.sameRegion).every((c) => c.region.code === code && c.cloud === cloud)).toBe(true);
  });

  it("keeps the data region first even when another cloud's region in the same city ranks as cheaper", () => {
    // Frankfurt: Azure Flex (cost index 1.1) in the data's region, AWS Lambda (1.0) a few km away.
    const { choices } = chooseProvider(request({ data: inRegion('germanywestcentral'), runtimeSec: 12 * MIN }));
    expect(choices.slice(0, 2).map((c) => `${c.cloud}:${c.region.code}`)).toEqual(['azure:germanywestcentral', 'aws:eu-central-1']);
    expect(choices[1]?.score).toBeLessThan(choices[0]?.score ?? 0);
  });

  it.each<[string, number, number, Cloud, string]>([
    ['Dublin', 53.34, -6.27, 'aws', 'eu-west-1'],
    ['Ohio', 40.0, -82.9, 'aws', 'us-east-2'],
    ['Mons, Belgium', 50.45, 3.95, 'gcp', 'europe-west1'],
    ['Council Bluffs', 41.3, -95.9, 'gcp', 'us-central1'],
    ['Amsterdam', 52.37, 4.9, 'azure', 'westeurope'],
    ['Gävle', 60.7, 17.1, 'azure', 'swedencentral'],
    ['Sydney', -33.9, 151.2, 'azure', 'australiaeast'],
  ])('ranks the region nearest to coordinates in %s first on %s', (_place, lat, lon, cloud, code) => {
    const { choices } = chooseProvider(request({ data: at(lat, lon), clouds: [cloud] }));
    expect(choices[0]?.region.code).toBe(code);
    expect(choices[0]?.sameRegion).toBe(false);
  });

  it('orders by distance when cost weighs nothing, and breaks ties by cost', () => {
    const { choices } = chooseProvider(request({ data: at(52.37, 4.9), costWeight: 0 }));
    const distances = choices.map((c) => c.distanceKm);
    expect(distances).toEqual([...distances].sort((a, b) => a - b));
    const westeurope = choices.filter((c) => c.region.code === 'westeurope').map((c) => c.platform);
    expect(westeurope).toEqual(['azure-consumption', 'azure-flex']);
  });

  it('lets cost outweigh a short distance when asked to', () => {
    // Flex costs a little more than Consumption; with cost weighing fully, every Consumption region outranks every Flex one.
    const { choices } = chooseProvider(request({ data: at(52.37, 4.9), clouds: ['azure'], costWeight: 1 }));
    const lastConsumption = choices.map((c) => c.platform).lastIndexOf('azure-consumption');
    const firstFlex = choices.map((c) => c.platform).indexOf('azure-flex');
    expect(lastConsumption).toBeLessThan(firstFlex);
  });

  it('numbers the choices 1..n in order', () => {
    const { choices } = chooseProvider(request());
    expect(choices.map((c) => c.rank)).toEqual(choices.map((_, i) => i + 1));
    expect(DEFAULT_COST_WEIGHT).toBeGreaterThan(0);
  });
});

describe('chooseProvider > lease, timeouts and memory', () => {
  it('gives every choice a lease resolveLease accepts, above the ceiling, and a timeout that holds the job', () => {
    for (const req of [request(), request({ runtimeSec: 40 * MIN }), request({ runtimeSec: 40 * MIN, trigger: 'http' })]) {
      for (const c of chooseProvider(req).choices) {
        const ceiling = CEILINGS[c.platform].ceilingSec;
        expect(c.lease.functionTimeoutSec).toBeGreaterThanOrEqual(req.runtimeSec);
        if (ceiling !== undefined) expect(c.lease.functionTimeoutSec).toBeLessThanOrEqual(ceiling);
        expect(c.lease.leaseSec).toBeGreaterThan(c.lease.ceilingSec);
        expect(
          resolveLease({ platform: c.platform, functionTimeoutSec: c.lease.functionTimeoutSec, leaseSec: c.lease.leaseSec }).leaseSec,
        ).toBe(c.lease.leaseSec);
        expect(c.memoryMb).toBeGreaterThanOrEqual(req.memoryMb);
      }
    }
  });

  it.each<[string, Partial<ChooseRequest>, string, { timeout: number; lease: number; visibility: number | undefined }]>([
    [
      'Lambda at its 15 min ceiling, SQS visibility six times that',
      { runtimeSec: 12 * MIN },
      'aws-lambda',
      { timeout: 900, lease: 1200, visibility: 5400 },
    ],
    ['GCF events at their 9 min ceiling', { runtimeSec: 5 * MIN }, 'gcf2-event', { timeout: 540, lease: 840, visibility: undefined }],
    [
      'GCF HTTP at its 60 min ceiling',
      { runtimeSec: 40 * MIN, trigger: 'http' },
      'gcf2-http',
      { timeout: 3600, lease: 3900, visibility: undefined },
    ],
    [
      'Azure Consumption at its 10 min ceiling',
      { runtimeSec: 5 * MIN },
      'azure-consumption',
      { timeout: 600, lease: 900, visibility: undefined },
    ],
    [
      'Flex at its 30 min default for a short job',
      { runtimeSec: 12 * MIN },
      'azure-flex',
      { timeout: 1800, lease: 2100, visibility: undefined },
    ],
    ['Flex at 1.5 times a long job', { runtimeSec: 70 * MIN }, 'azure-flex', { timeout: 6300, lease: 6600, visibility: undefined }],
  ])('sets %s', (_name, req, platform, expected) => {
    const c = chooseProvider(request(req)).choices.find((x) => x.platform === platform);
    expect(c?.lease).toMatchObject({
      functionTimeoutSec: expected.timeout,
      leaseSec: expected.lease,
      visibilityTimeoutSec: expected.visibility,
    });
  });

  it.each<[number, string, number]>([
    [3 * GB, 'gcf2-event', 4 * GB],
    [600, 'gcf2-event', 1 * GB],
    [600, 'azure-flex', 2 * GB],
    [3 * GB, 'azure-flex', 4 * GB],
    [1_000, 'azure-consumption', 1_536],
    [3_000, 'aws-lambda', 3_000],
    [64, 'aws-lambda', 128],
  ])('configures %i MB peak on %s as %i MB, the smallest size that holds it', (peak, platform, configured) => {
    const c = chooseProvider(request({ memoryMb: peak })).choices.find((x) => x.platform === platform);
    expect(c?.memoryMb).toBe(configured);
  });
});

describe('chooseProvider > warnings', () => {
  const warningsOf = (req: Partial<ChooseRequest>, code: string, platform: string) =>
    chooseProvider(request(req)).choices.find((c) => c.region.code === code && c.platform === platform)?.warnings ?? [];

  it('flags availability the catalog could not confirm', () => {
    expect(warningsOf({ data: inRegion('ap-east-2') }, 'ap-east-2', 'aws-lambda')).toContain(
      'AWS Lambda in ap-east-2 is unconfirmed: check with the provider before deploying',
    );
    expect(warningsOf({}, 'eu-west-1', 'aws-lambda')).toEqual([]);
  });

  it('flags a job that uses most of its timeout', () => {
    expect(warningsOf({ runtimeSec: 14 * MIN }, 'eu-west-1', 'aws-lambda')).toContain(
      'tight: the 14 min job uses over 80 % of the 15 min timeout',
    );
  });

  it('flags Pub/Sub push redelivering a long HTTP job while it runs', () => {
    const warnings = warningsOf({ data: inRegion('europe-west1'), runtimeSec: 30 * MIN, trigger: 'http' }, 'europe-west1', 'gcf2-http');
    expect(warnings.join('\n')).toMatch(/redelivers after 600 s while the 30 min job still runs/);
  });
});

describe('chooseProvider > input errors', () => {
  it('refuses an unknown region code with close matches', () => {
    expect(() => chooseProvider(request({ data: inRegion('eu-west-9') }))).toThrow(UnknownRegionError);
    expect(() => chooseProvider(request({ data: inRegion('eu-west-9') }))).toThrow(/did you mean eu-west-1/);
  });

  it('refuses coordinates off the globe', () => {
    expect(() => chooseProvider(request({ data: at(123, 0) }))).toThrow(InvalidCoordinatesError);
  });

  it.each<[string, Partial<ChooseRequest>, RegExp]>([
    ['a cost weight above 1', { costWeight: 1.5 }, /cost weight must be within 0..1/],
    ['a fractional runtime', { runtimeSec: 1.5 }, /runtime must be a positive whole number/],
    ['no memory', { memoryMb: 0 }, /memory must be a positive whole number/],
    ['an unknown cloud', { clouds: ['oracle' as Cloud] }, /unknown cloud "oracle"/],
    ['no cloud', { clouds: [] }, /no cloud to choose from/],
  ])('refuses %s', (_name, req, message) => {
    expect(() => chooseProvider(request(req))).toThrow(InvalidParamsError);
    expect(() => chooseProvider(request(req))).toThrow(message);
  });

  it('chooses from the catalog it is given', () => {
    const only: Region[] = [findRegion('eu-west-1'), findRegion('westeurope')];
    const { choices } = chooseProvider(request({ data: at(52.37, 4.9) }), only);
    expect(new Set(choices.map((c) => c.region.code))).toEqual(new Set(['eu-west-1', 'westeurope']));
  });
});
