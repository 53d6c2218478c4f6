/** Types of scripts/emulators/pmtiles.mjs, for the tests that run go-pmtiles. */
export declare const GO_PMTILES_MODULE: string;
export declare const GO_PMTILES_VERSION: string;
/** Absolute path of the go-pmtiles binary `install()` builds. */
export declare const GO_PMTILES_BIN: string;
export declare function installedGoPmtilesVersion(): string | undefined;
export declare function install(): Promise<void>;
