/** Types for scripts/emulators/aws.mjs, so test/support can reuse its paths instead of repeating them. */
export declare const MOTO_VERSION: string;
export declare const venvDir: string;
export declare function dynamoDbLocalPaths(): { dir: string; jar: string; lib: string };
export declare function motoServerPath(): string;
export declare function install(): Promise<void>;
