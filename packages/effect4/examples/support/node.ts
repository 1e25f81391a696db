/**
 * How this edition's examples run: plain node (22.18+ strips the types itself) over the sources, with
 * scripts/tsResolve.mjs resolving `./x.js` to `./x.ts` and `effect-resilience/*` to src/ — as `npm run serve`,
 * `npm run demo` and `npm run overload` run them (package.json), and the programs they start.
 */
import { fileURLToPath } from "node:url"

/** This package's directory, where `nodeArgs` work. */
export const pkg = fileURLToPath(new URL("../..", import.meta.url))

export const nodeArgs: ReadonlyArray<string> = [
  "--disable-warning=ExperimentalWarning",
  "--experimental-transform-types",
  "--import",
  "./scripts/tsResolve.mjs"
]
