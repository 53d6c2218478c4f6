export declare const SHARP_NATIVE_LOCK_DIR: string;
export declare const SHARP_TARGETS: readonly ('linux-x64' | 'linux-arm64')[];
export type SharpTarget = 'linux-x64' | 'linux-arm64';
export declare function lockedSharpVersion(): string;
export declare function sharpNativeDir(root: string, target: SharpTarget): string;
export declare function installSharpNative(target: SharpTarget, root?: string): string;
export declare function sharpNativeFiles(target: SharpTarget, root?: string): { readonly name: string; readonly data: Uint8Array }[];
export declare function install(): Promise<void>;
