/** Types of scripts/emulators/postgres.mjs, for the TypeScript test support that imports it. */
export declare function postgresBinCandidates(): string[];
/** The bin directory holding initdb, pg_ctl and postgres, or undefined. */
export declare function findPostgresBin(): string | undefined;
export declare const POSTGRES_INSTALL_HINT: string;
export declare function postgisInstalled(): boolean;
export declare function install(): Promise<void>;
