import type { Cloud, Region } from './catalog.js';
import { InvalidCoordinatesError, UnknownRegionError } from './errors.js';
import { AWS_REGIONS, AZURE_REGIONS, GCP_REGIONS } from './regions.js';

/** Every region of the catalog. */
export const ALL_REGIONS: readonly Region[] = [...AWS_REGIONS, ...GCP_REGIONS, ...AZURE_REGIONS];

/** A point on Earth, decimal degrees. */
export interface LatLon {
  readonly lat: number;
  readonly lon: number;
}

/** Mean Earth radius (IUGG), km. */
const EARTH_RADIUS_KM = 6_371.0088;

/**
 * Great-circle distance in km (haversine). Good to ~0.5 % against the
 * ellipsoid: far finer than the metro-area coordinates it is fed.
 */
export function haversineKm(a: LatLon, b: LatLon): number {
  const rad = Math.PI / 180;
  const dLat = (b.lat - a.lat) * rad;
  const dLon = (b.lon - a.lon) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** @throws InvalidCoordinatesError unless lat is in [-90, 90] and lon in [-180, 180]. */
export function validateLatLon(lat: number, lon: number): LatLon {
  const problems: string[] = [];
  if (!Number.isFinite(lat) || lat < -90 || lat > 90) problems.push(`latitude ${lat} is not within -90..90`);
  if (!Number.isFinite(lon) || lon < -180 || lon > 180) problems.push(`longitude ${lon} is not within -180..180`);
  if (problems.length > 0) throw new InvalidCoordinatesError(`${problems.join('; ')}; give decimal degrees, e.g. --lat 52.37 --lon 4.90`);
  return { lat, lon };
}

/** Optimal string alignment distance: Levenshtein plus adjacent swaps (`eu-wset-1`). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}

/**
 * Known region codes closest to `input`, best first: codes within a third of
 * their length in edits, or that contain the input (`westeu` -> `westeurope`).
 */
export function closeRegionCodes(input: string, regions: readonly Region[] = ALL_REGIONS, max = 5): string[] {
  const needle = input.trim().toLowerCase();
  const scored = regions.map((r) => {
    const distance = editDistance(needle, r.code);
    const contains = needle.length >= 3 && (r.code.includes(needle) || needle.includes(r.code));
    return {
      code: r.code,
      rank: contains ? Math.min(distance, 1) : distance,
      ok: contains || distance <= Math.max(2, Math.floor(r.code.length / 3)),
    };
  });
  const close = scored.filter((s) => s.ok).sort((x, y) => x.rank - y.rank || x.code.localeCompare(y.code));
  // Only the best and the next best tier: `eu-wset-1` suggests eu-west-1..3, not every `*-west-1`.
  const best = close[0]?.rank ?? 0;
  return close
    .filter((s) => s.rank <= best + 1)
    .slice(0, max)
    .map((s) => s.code);
}

/**
 * Find a region by its provider code. Codes do not collide across providers
 * (`eu-west-1`, `europe-west1`, `westeurope`), so the code alone names the cloud.
 * Matching ignores case and surrounding spaces, nothing more: a near miss is
 * an error with suggestions, never a silent guess.
 *
 * @throws UnknownRegionError with the closest known codes.
 */
export function findRegion(code: string, regions: readonly Region[] = ALL_REGIONS): Region {
  const needle = code.trim().toLowerCase();
  const found = regions.find((r) => r.code === needle);
  if (found) return found;
  throw new UnknownRegionError(code, closeRegionCodes(code, regions));
}

/** Regions of the given clouds. */
export function regionsOf(clouds: readonly Cloud[], regions: readonly Region[] = ALL_REGIONS): Region[] {
  return regions.filter((r) => clouds.includes(r.cloud));
}
