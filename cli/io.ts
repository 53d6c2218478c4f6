/**
 * What a command talks to: its output streams and the directory its relative paths start from.
 * Its own file so that `main.ts` (which imports every command) and the commands (which take it)
 * do not import each other.
 */
export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}
