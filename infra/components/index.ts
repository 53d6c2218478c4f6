/**
 * `tessera/pulumi`: Tessera as component resources of your own Pulumi program (docs/deploy.md, "Tessera in your own
 * Pulumi program").
 *
 * @example
 * import { TesseraAws } from 'tessera/pulumi';
 * const tiles = new TesseraAws('tiles', { region: 'eu-west-1' });
 * export const outputBucket = tiles.outputs.outputBucket;
 */
export {
  ARCHIVE_DIR_ENV,
  defaultArchiveDir,
  packageArchiveDir,
  type TelemetryArgs,
  type TesseraArgs,
  TesseraArgsError,
  type TesseraOutputs,
} from './args.js';
export { TesseraAws, type TesseraAwsArgs, type TesseraAwsOutputs } from './aws.js';
export { TesseraAzure, type TesseraAzureArgs, type TesseraAzureOutputs } from './azure.js';
export { TesseraGcp, type TesseraGcpArgs, type TesseraGcpOutputs } from './gcp.js';
