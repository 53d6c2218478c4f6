import { classifyAws, isAws } from './classify-aws.js';
import { classifyAzure, isAzure } from './classify-azure.js';
import { classifyGcp, isGcp } from './classify-gcp.js';
import type { Classified, WireRequest } from './wire.js';

/**
 * Which cloud a request went to, told from its own shape rather than its endpoint (the suites put fault
 * proxies on fresh ports in front of the emulators): a SigV4 signature or an `X-Amz-Target` is AWS,
 * `x-ms-version` (every Storage SDK call) or a Key Vault host is Azure, a `google.` gRPC method or the
 * Cloud Storage JSON API is GCP. Anything else (an artefact fetched over plain HTTP) is not a cloud call.
 */
export function classify(wire: WireRequest): Classified {
  if (isAws(wire)) return classifyAws(wire);
  if (isAzure(wire)) return classifyAzure(wire);
  if (isGcp(wire)) return classifyGcp(wire);
  return { kind: 'not-cloud' };
}

/**
 * Whether the classifier will need this request's body (the resource is named only there): JSON-protocol
 * AWS calls, SQS's query protocol, S3 DeleteObjects, a GCS compose or metadata-only insert, a multipart
 * upload whose name is not in the query. Everything else keeps no body (tiles and scenes are megabytes).
 */
export function needsBody(method: string, path: string, headers: Readonly<Record<string, string>>): boolean {
  if (headers['x-amz-target'] !== undefined) return true;
  if ((headers['content-type'] ?? '').includes('x-www-form-urlencoded')) return true;
  const [p = '', query = ''] = path.split('?');
  const q = new URLSearchParams(query);
  if (method === 'POST' && q.has('delete')) return true;
  if (method === 'POST' && /\/storage\/v1\/b\/[^/]+\/o(\/[^/]+\/compose)?$/.test(p) && !p.startsWith('/upload/')) return true;
  return p.startsWith('/upload/storage/v1/') && q.get('uploadType') === 'multipart' && !q.has('name');
}
