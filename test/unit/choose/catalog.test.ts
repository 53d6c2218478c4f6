import { describe, expect, it } from 'vitest';
import { CEILINGS } from '../../../shared/domain/ceilings.js';
import {
  ALL_REGIONS,
  AWS_REGIONS,
  AZURE_REGIONS,
  CATALOG_SOURCES,
  CLOUDS,
  closeRegionCodes,
  DEPLOY_PLATFORMS,
  findRegion,
  GCP_REGIONS,
  haversineKm,
  InvalidCoordinatesError,
  PLATFORM_SPECS,
  platformsOf,
  UnknownRegionError,
  validateLatLon,
} from '../../../shared/placement/catalog/index.js';

describe('region catalog', () => {
  it.each([
    ['aws', AWS_REGIONS, 25],
    ['gcp', GCP_REGIONS, 30],
    ['azure', AZURE_REGIONS, 40],
  ] as const)('covers at least the main %s regions (%#)', (cloud, regions, atLeast) => {
    expect(regions.length).toBeGreaterThanOrEqual(atLeast);
    expect(regions.every((r) => r.cloud === cloud)).toBe(true);
  });

  it('has each region code once, in the shape its provider uses', () => {
    const codes = ALL_REGIONS.map((r) => r.code);
    expect(new Set(codes).size).toBe(codes.length);
    const shape = { aws: /^[a-z]{2}-[a-z]+-\d$/, gcp: /^[a-z]+-[a-z]+\d+$/, azure: /^[a-z]+\d?$/ } as const;
    const misshapen = ALL_REGIONS.filter((r) => !shape[r.cloud].test(r.code)).map((r) => r.code);
    expect(misshapen).toEqual([]);
  });

  it('places every region on Earth, with a name', () => {
    const bad = ALL_REGIONS.filter((r) => Math.abs(r.lat) > 90 || Math.abs(r.lon) > 180 || r.name.trim() === '').map((r) => r.code);
    expect(bad).toEqual([]);
  });

  it('offers the claim store wherever it offers compute as confirmed, and Lambda in the big AWS regions', () => {
    for (const code of ['us-east-1', 'eu-west-1', 'ap-northeast-1']) {
      expect(findRegion(code).offers).toEqual({ lambda: 'yes', dynamodb: 'yes' });
    }
    expect(findRegion('europe-west1').offers).toEqual({ gcf2: 'yes', firestore: 'yes' });
  });

  it('records that Flex Consumption is only in some Azure regions', () => {
    const flex = AZURE_REGIONS.filter((r) => r.offers.flex === 'yes').map((r) => r.code);
    expect(flex).toEqual(expect.arrayContaining(['westeurope', 'northeurope', 'eastus', 'swedencentral']));
    expect(flex.length).toBeLessThan(AZURE_REGIONS.length);
    expect(AZURE_REGIONS.find((r) => r.code === 'francesouth')?.offers.flex).toBe('no');
  });

  it('cites its sources with the date they were read', () => {
    expect(CATALOG_SOURCES.length).toBeGreaterThan(5);
    for (const s of CATALOG_SOURCES) {
      expect(s.url).toMatch(/https:\/\//);
      expect(s.read).toMatch(/^\d{4}-\d{2}-\d{2}/);
    }
  });
});

describe('platform specs', () => {
  it('take ceilings and memory limits from shared/domain/ceilings.ts, not copies', () => {
    for (const p of DEPLOY_PLATFORMS) expect(PLATFORM_SPECS[p].ceiling).toBe(CEILINGS[p]);
  });

  it.each(DEPLOY_PLATFORMS)('%s: memory sizes ascend and end at the platform maximum', (p) => {
    const spec = PLATFORM_SPECS[p];
    const steps = spec.memoryStepsMb;
    if (steps === undefined) {
      expect(spec.minMemoryMb).toBeLessThan(spec.ceiling.maxMemoryMb);
      return;
    }
    expect([...steps].sort((a, b) => a - b)).toEqual(steps);
    expect(steps.at(-1)).toBe(spec.ceiling.maxMemoryMb);
    expect(steps[0]).toBe(spec.minMemoryMb);
  });

  it('gives every cloud at least one platform Tessera can deploy', () => {
    for (const cloud of CLOUDS) expect(platformsOf(cloud).some((s) => s.notDeployable === undefined)).toBe(true);
  });
});

describe('findRegion', () => {
  it.each([
    ['eu-west-1', 'aws'],
    ['europe-west1', 'gcp'],
    ['westeurope', 'azure'],
    [' WestEurope ', 'azure'],
  ])('finds %j on %s', (code, cloud) => {
    expect(findRegion(code).cloud).toBe(cloud);
  });

  it.each([
    ['eu-wset-1', 'eu-west-1'],
    ['europe-west-1', 'europe-west1'],
    ['westeu', 'westeurope'],
    ['west-europe', 'westeurope'],
    ['us-central-1', 'us-central1'],
  ])('refuses the unknown code %j and suggests %j', (code, suggestion) => {
    let error: unknown;
    try {
      findRegion(code);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UnknownRegionError);
    const unknown = error as UnknownRegionError;
    expect(unknown.code).toBe('INVALID_PARAMS');
    expect(unknown.region).toBe(code);
    expect(unknown.suggestions[0]).toBe(suggestion);
    expect(unknown.message).toContain(`did you mean ${suggestion}`);
  });

  it('suggests only the closest tier of codes', () => {
    expect(closeRegionCodes('eu-wset-1')).toEqual(['eu-west-1', 'eu-west-2', 'eu-west-3']);
  });

  it('suggests nothing for a code like no region at all, and still says what to write', () => {
    expect(closeRegionCodes('mars-north-9')).toEqual([]);
    expect(() => findRegion('mars-north-9')).toThrow(/unknown region code "mars-north-9".*--list-regions/);
  });
});

describe('geography', () => {
  it.each([
    [{ lat: 51.5074, lon: -0.1278 }, { lat: 48.8566, lon: 2.3522 }, 344],
    [{ lat: 40.7128, lon: -74.006 }, { lat: 51.5074, lon: -0.1278 }, 5_570],
    [{ lat: 0, lon: 0 }, { lat: 0, lon: 180 }, 20_015],
  ])('measures great-circle distance (%#)', (a, b, km) => {
    expect(haversineKm(a, b)).toBeCloseTo(km, -1);
  });

  it('refuses coordinates off the globe with a typed error', () => {
    expect(() => validateLatLon(91, 0)).toThrow(InvalidCoordinatesError);
    expect(() => validateLatLon(0, -181)).toThrow(/longitude -181/);
    expect(() => validateLatLon(Number.NaN, 0)).toThrow(/latitude NaN/);
    expect(validateLatLon(-33.9, 151.2)).toEqual({ lat: -33.9, lon: 151.2 });
  });
});
