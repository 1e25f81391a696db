/**
 * How this edition's examples run: tsx over the sources in this package's directory (tsconfig.json's paths send
 * `effect-resilience/*` to src/ and `@effect-resilience/core/*` to the core's sources), as `npm run serve`,
 * `npm run demo` and `npm run overload` run them (package.json), and the programs they start.
 */
import { fileURLToPath } from "node:url"

/** This package's directory, where `nodeArgs` work. */
export const pkg = fileURLToPath(new URL("../..", import.meta.url))

export const nodeArgs: ReadonlyArray<string> = ["--import", "tsx"]
