/**
 * `npm run overload` on the Effect 3 edition: the shared load generator (examples/overload.ts in the repository's
 * root, plain Node) against this edition's `npm run serve` (./serve.ts). See docs/overload.md, "Real processes".
 *
 *   npm run overload -- [--capacity 4:20] [--load 3] [--seconds 10] [--share 0.05] [--fast-first] [--only shed|none]
 *   npm run overload -- --mix [--capacity 32:20] [--lanes 128] [--share 0.05] [--only adaptive|gradient2]
 */
import { useServeProgram } from "../../../examples/faults/support.js"
import { cli } from "../../../examples/overload.js"
import { nodeArgs, pkg } from "./support/node.js"

useServeProgram({ cwd: pkg, nodeArgs, serve: "examples/serve.ts" })
cli()
