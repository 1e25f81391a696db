/**
 * The command line of a fleet replica (./replica.ts and the Effect 4 edition's
 * packages/effect4/examples/fleet/replica.ts take the same one), without Effect: see ./replica.ts for the
 * options. Exits with a usage line when `--redis`, `--name` or `--dependency` is missing.
 */
import { parseArgs } from "node:util"

export interface ReplicaArgs {
  readonly redisUrl: string
  readonly name: string
  /** The dependency's URL, with this replica's id in its query (`?replica=<id>`). */
  readonly dependency: string
  readonly flushInterval: number
  readonly timeout: number
  readonly permits: number
  readonly openFor: number
  /** Absent: the breaker's default (the `openFor` delay). */
  readonly halfOpenTimeout: number | undefined
  readonly minimumCalls: number
  readonly every: number
}

export const parseReplicaArgs = (argv: ReadonlyArray<string> = process.argv.slice(2)): ReplicaArgs => {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      redis: { type: "string" },
      name: { type: "string" },
      dependency: { type: "string" },
      id: { type: "string", default: String(process.pid) },
      "flush-interval": { type: "string", default: "100" },
      timeout: { type: "string", default: "250" },
      permits: { type: "string", default: "2" },
      "open-for": { type: "string", default: "1500" },
      "half-open-timeout": { type: "string" },
      "minimum-calls": { type: "string", default: "20" },
      every: { type: "string", default: "5" }
    }
  })
  if (values.redis === undefined || values.name === undefined || values.dependency === undefined) {
    console.error("usage: replica.ts --redis <url> --name <breaker> --dependency <url> [options]")
    process.exit(2)
  }
  return {
    redisUrl: values.redis,
    name: values.name,
    dependency: `${values.dependency}?replica=${encodeURIComponent(values.id)}`,
    flushInterval: Number(values["flush-interval"]),
    timeout: Number(values.timeout),
    permits: Number(values.permits),
    openFor: Number(values["open-for"]),
    halfOpenTimeout: values["half-open-timeout"] === undefined ? undefined : Number(values["half-open-timeout"]),
    minimumCalls: Number(values["minimum-calls"]),
    every: Number(values.every)
  }
}
