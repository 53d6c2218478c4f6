/**
 * Where an ingest may fetch from over http(s) (docs/ingest.md, "Remote hrefs stay in their lane"): the
 * allow-list of hosts (stack config `tessera:ingestAllowedHosts`, `TESSERA_INGEST_ALLOWED_HOSTS`,
 * `tessera ingest --allowed-hosts`) and the named opt-in for non-public addresses
 * (`TESSERA_INGEST_ALLOW_PRIVATE_ADDRESSES`, `tessera ingest --allow-private-address`), which infra/ never
 * sets: only a test or a local run against its own server does. Parsed here, once, so infra/, the function
 * runtime and the CLI refuse the same typos with the same words.
 */

/** Entries of a comma- or whitespace-separated list, empty ones dropped. */
export function splitList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** A host as URL.hostname gives it, without a trailing dot (`Example.COM.` and `example.com` are one host). */
function canonicalHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/**
 * One allow-list entry, normalised: `example.com` (that host), `*.example.com` (any host below it, not
 * the domain itself), an IPv4 literal or a bracketed IPv6 literal. Throws a message naming the entry.
 */
function hostPattern(entry: string): string {
  const wildcard = entry.startsWith('*.');
  const host = wildcard ? entry.slice(2) : entry;
  const bad = (why: string): never => {
    throw new Error(
      `${JSON.stringify(entry)} ${why}; give a host name (example.com), *.example.com for every host below it, or an IP address`,
    );
  };
  if (host.length === 0 || /[/\\@?#%\s*]/.test(host)) bad('is not a host name');
  // A port or a path would be silently ignored by the host comparison, so neither is accepted.
  if (!host.startsWith('[') && host.includes(':')) bad('names a port or is an IPv6 address without brackets');
  let parsed: URL;
  try {
    parsed = new URL(`http://${host}/`);
  } catch {
    return bad('is not a host name');
  }
  if (parsed.port !== '' || parsed.username !== '' || parsed.pathname !== '/') bad('is more than a host name');
  const hostname = canonicalHost(parsed.hostname);
  if (wildcard && (hostname.startsWith('[') || IPV4.test(hostname))) bad('puts *. before an IP address');
  if (wildcard && !hostname.includes('.')) bad('is a wildcard over a whole top-level domain');
  return wildcard ? `*.${hostname}` : hostname;
}

/**
 * Parse an allow-list of hosts: every entry normalised, or every problem named (so a stack or a
 * function environment fails once with all of them).
 *
 * @example
 * parseHostPatterns(['Example.com', '*.blob.core.windows.net']) // { hosts: ['example.com', '*.blob.core.windows.net'], problems: [] }
 */
export function parseHostPatterns(entries: readonly string[]): { hosts: string[]; problems: string[] } {
  const hosts: string[] = [];
  const problems: string[] = [];
  for (const entry of entries) {
    try {
      hosts.push(hostPattern(entry));
    } catch (e) {
      problems.push((e as Error).message);
    }
  }
  return { hosts, problems };
}

/** Whether `hostname` (a URL's) is one the patterns name. */
export function hostMatches(hostname: string, patterns: readonly string[]): boolean {
  const host = canonicalHost(hostname);
  return patterns.some((p) => (p.startsWith('*.') ? host.endsWith(p.slice(1)) : host === p));
}

/**
 * Why `entry` is not an address or a CIDR block of the private-address opt-in (`127.0.0.1`,
 * `10.0.0.0/8`, `::1`, `fd00::/8`), or undefined when it is one.
 */
export function addressPatternProblem(entry: string): string | undefined {
  const [address = '', prefix, extra] = entry.split('/');
  const problem = `${JSON.stringify(entry)} is not an IP address or a CIDR block (e.g. 127.0.0.1, 10.0.0.0/8, ::1)`;
  if (extra !== undefined) return problem;
  const v4 = IPV4.exec(address);
  const max = v4 ? 32 : 128;
  if (v4) {
    if (v4.slice(1).some((octet) => Number(octet) > 255)) return problem;
  } else if (!/^[0-9a-f:.]+$/i.test(address) || !address.includes(':') || (address.match(/::/g)?.length ?? 0) > 1) {
    return problem;
  }
  if (prefix !== undefined && (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max)) return problem;
  return undefined;
}
