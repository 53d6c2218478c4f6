/** Types of scripts/emulators/gcp.mjs, for the TypeScript test support that imports it. */
export declare const FAKE_GCS_MODULE: string;
export declare const FAKE_GCS_VERSION: string;
/** Absolute path of the fake-gcs-server binary `install()` builds. */
export declare const FAKE_GCS_BIN: string;
export declare const FIRESTORE_PATCH: string;
export declare function pubsubEmulatorCandidates(): string[];
/** The Pub/Sub emulator launcher, or undefined when this machine has none. */
export declare function findPubsubEmulator(): string | undefined;
export declare function install(): Promise<void>;
