import { assertNever } from '../domain/claim.js';
import { contentDigest } from '../domain/content-digest.js';
import { MosaicChangedError, OutputOccupiedError } from '../domain/errors.js';
import type { ObjectHead, ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';

/** What became of an output derived from a scene's tiles. */
export type DerivedWriteResult = 'written' | 'already-present' | 'replaced';

/** One output derived from a scene's tiles (the COG mosaic, the output STAC Item) and how to judge what is at its key. */
export interface DerivedWrite {
  readonly sceneKey: string;
  readonly key: string;
  readonly body: Uint8Array;
  readonly contentType: string;
  /**
   * Asked only when the key holds other bytes than `body`: whether the object there (`current`, as the
   * create-only write's refusal read it) is this scene's output made from tile versions a repair has replaced
   * since, which this write may replace. It throws to stop the assembly (its own view of the tiles outdated).
   * Absent, or answering false: the other bytes are an alarm.
   */
  readonly isStale?: ((current: ObjectHead) => Promise<boolean>) | undefined;
}

/**
 * Write a derived output: create-only, so a re-run or a duplicate assembly finds its own bytes in place
 * (`already-present`: INFO, `write-already-present`). Other bytes at the key are replaced only when
 * `isStale` shows them to be this scene's output from before a repair, and then conditionally on the
 * version the refusal read (`putIfMatch`), never blindly: `replaced` (INFO `mosaic-replaced`, counted). A
 * change of that version meanwhile (another assembly got there first) replaces nothing and throws
 * MosaicChangedError (retryable). Any other bytes are an alarm: `write-occupied`, ERROR, OutputOccupiedError,
 * nothing overwritten.
 *
 * Before (issue 25 item 6): a re-assembly after an overwrite repair met its old COG mosaic and failed with
 * `write-occupied`; the COG and the STAC Item stayed those of the tiles before the repair.
 */
export async function writeDerivedOutput(outputs: ObjectStore, telemetry: Telemetry, w: DerivedWrite): Promise<DerivedWriteResult> {
  const { sceneKey, key, body, contentType } = w;
  const put = await outputs.putIfAbsent(key, body, { contentType });
  switch (put.kind) {
    case 'written':
      return 'written';
    case 'already-present': {
      if (put.sameBytes) {
        telemetry.count('write-already-present');
        telemetry.log('INFO', 'write-already-present', { sceneKey, outputKey: key });
        return 'already-present';
      }
      const current = put.current;
      if (current !== undefined && w.isStale !== undefined && (await w.isStale(current))) {
        const replaced = await outputs.putIfMatch(key, body, current.version, { contentType });
        switch (replaced.kind) {
          case 'written':
            telemetry.count('mosaic-replaced');
            telemetry.log('INFO', 'mosaic-replaced', { sceneKey, outputKey: key, previous: current.version, version: replaced.version });
            return 'replaced';
          case 'version-mismatch':
          case 'absent':
            throw new MosaicChangedError(sceneKey, [key]);
          default:
            return assertNever(replaced, 'putIfMatch result');
        }
      }
      telemetry.count('write-occupied');
      telemetry.log('ERROR', 'write-occupied', { sceneKey, outputKey: key, found: current?.version });
      const digest = contentDigest(body);
      throw new OutputOccupiedError(outputs.name, key, { size: digest.size, sha256Hex: digest.sha256Hex }, current);
    }
    default:
      return assertNever(put, 'putIfAbsent result');
  }
}
