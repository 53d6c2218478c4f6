/** Types of scripts/emulators/gcp.mjs, for the TypeScript test support that imports it. */
export declare const FAKE_GCS_MODULE: string;
export declare const FAKE_GCS_VERSION: string;
/** Absolute path of the fake-gcs-server binary `install()` builds. */
export declare const FAKE_GCS_BIN: string;
export declare function pubsubEmulatorCandidates(): string[];
/** The Pub/Sub emulator launcher, or undefined when this machine has none. */
export declare function findPubsubEmulator(): string | undefined;
/** Where Google's Firestore emulator jar may live ($TESSERA_FIRESTORE_EMULATOR_JAR first). */
export declare function firestoreEmulatorCandidates(): string[];
/** The Firestore emulator jar, or undefined when this machine has none. */
export declare function findFirestoreEmulator(): string | undefined;
/** The emulator's main class (the jar has no Main-Class entry). */
export declare const FIRESTORE_EMULATOR_MAIN: string;
export declare function install(): Promise<void>;
