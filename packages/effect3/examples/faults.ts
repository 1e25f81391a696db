/**
 * `npm run faults [-- --only <name>] [--json]`: the fault suite. Each fault (examples/faults/*.ts) starts
 * real processes, injects its fault, counts what survived, and cleans up; they run one after another. One
 * table row per result: what was offered, lost and duplicated, and notes. Exits 1 when any row lost or
 * duplicated something or broke its bound (`ok: false`), or a fault failed to run; 2 on a bad option.
 * `--json` also prints the rows as JSON, as the last line. The figures are in docs/reliability.md. This is the
 * Effect 3 edition's list (`npm run faults:effect3`); `npm run faults` runs the Effect 4 edition's. The runner is
 * examples/faults/runner.ts in the repository's root, shared by both.
 */
import { pathToFileURL } from "node:url"
import type { Fault } from "../../../examples/faults/fault.js"
import { redisFailover } from "../../../examples/faults/redisFailover.js"
import { redisKill } from "../../../examples/faults/redisKill.js"
import { cli } from "../../../examples/faults/runner.js"
import { clockSkew } from "../../../examples/faults/skew.js"
import { useServeProgram } from "../../../examples/faults/support.js"
import { consumerKillPg, consumerKillRedis } from "./faults/consumerKill.js"
import { pgTerminateClaim } from "./faults/pgTerminateClaim.js"
import { pgTerminateConsume } from "./faults/pgTerminateConsume.js"
import { consumerPoisonExitPg, consumerPoisonExitRedis } from "./faults/poisonExit.js"
import { redisReplicaLag } from "./faults/replicationLoss.js"
import { nodeArgs, pkg } from "./support/node.js"

export { failed, table } from "../../../examples/faults/runner.js"

useServeProgram({ cwd: pkg, nodeArgs, serve: "examples/serve.ts" })

/** Every fault, in the order they run: one import and one entry each. */
export const faults: ReadonlyArray<Fault> = [
  redisKill,
  redisFailover,
  redisReplicaLag,
  pgTerminateClaim,
  pgTerminateConsume,
  consumerKillPg,
  consumerKillRedis,
  consumerPoisonExitPg,
  consumerPoisonExitRedis,
  clockSkew
]

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await cli(faults)
