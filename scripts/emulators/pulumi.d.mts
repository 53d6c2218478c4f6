/** Types for scripts/emulators/pulumi.mjs, so the real-engine test can reuse its paths and install step. */
export declare const PULUMI_VERSION: string;
export declare const PULUMI_LANGUAGE_NODEJS_VERSION: string;
export declare const PULUMI_VENDOR_DIR: string;
export declare const PULUMI_BIN_DIR: string;
export declare function install(options?: { vendorDir?: string; binDir?: string }): Promise<void>;
