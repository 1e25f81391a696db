/**
 * `npm run faults [-- --only <name>] [--json]` on the Effect 4 edition: the Effect 3 edition's fault suite
 * (examples/faults.ts in the repository's root: the same faults, runner, table and exit codes) with every process
 * and library call on this edition — `npm run serve` is ./serve.ts, the queue workers and the PostgreSQL faults are
 * ./faults/*.ts. The Effect-free faults (redis-kill, clock-skew, redis-failover's driver) are the root's, run
 * against this edition's programs.
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

/** Every fault, in the root's order. */
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

// serve and the failover app are this edition's (the root's faults start them by their path from `pkg`)
useServeProgram({ cwd: pkg, nodeArgs, serve: "examples/serve.ts" })

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await cli(faults)
