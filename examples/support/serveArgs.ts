/**
 * The command line of `npm run serve` (both editions: examples/serve.ts and packages/effect4/examples/serve.ts):
 * every option known, every value checked. No Effect here, so both editions share it.
 */
export interface ServeArgs {
  readonly port: number
  readonly store: "memory" | "sqlite" | "postgres" | "redis"
  readonly db: string
  readonly rate: { readonly capacity: number; readonly refill: number }
  /** How long a claim of a crashed process blocks its key (the idempotency lease), in milliseconds. */
  readonly leaseMillis: number
  /** `--api-keys key=customer,...`: authenticate callers by `X-Api-Key`; without it, by address. */
  readonly apiKeys: ReadonlyMap<string, string> | undefined
  /** `--shed adaptive`: load shedding through an adaptive limiter in front of POST /orders. */
  readonly shed: boolean
  /** `--shed gradient2`: the same, with Gradient2 in place of the middleware's default algorithm (to compare). */
  readonly shedAlgorithm: "default" | "gradient2"
  /** `--capacity <concurrency>:<ms>`: POST /orders as a resource of fixed capacity. */
  readonly capacity: { readonly concurrency: number; readonly serviceMillis: number } | undefined
  /** `--redis-url <url>`: the Redis of `--store redis` (default: REDIS_URL, else redis://127.0.0.1:6379). */
  readonly redisUrl: string | undefined
  /** `--clock-skew <ms>`: this process' `Clock` runs that far ahead (negative: behind) of the real time. */
  readonly clockSkewMillis: number
  /** `--rate-on-error allow|deny`: what the Redis rate limiter decides while Redis fails (default deny). */
  readonly rateOnError: "allow" | "deny"
}

const usage = "usage: npm run serve -- [--port <p>] [--store memory|sqlite|postgres|redis] [--db <path>] " +
  "[--rate <capacity>:<refillPerSecond>] [--lease <ms>] [--api-keys <key>=<customer>,...] " +
  "[--shed adaptive|gradient2] [--capacity <concurrency>:<ms per request>] [--redis-url <url>] [--clock-skew <ms>] " +
  "[--rate-on-error allow|deny]\n" +
  "Stops on SIGINT or SIGTERM: stops accepting connections, lets the requests in flight finish, exits."

const fail = (message: string): never => {
  console.error(`${message}\n${usage}`)
  process.exit(2)
}

export const parseArgs = (argv: ReadonlyArray<string>): ServeArgs => {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`)
    if (i === -1) return undefined
    const value = argv[i + 1]
    return value === undefined || value.startsWith("--") ? fail(`--${name} needs a value`) : value
  }
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(usage)
    process.exit(0)
  }
  const options = ["--port", "--store", "--db", "--rate", "--lease", "--api-keys", "--shed", "--capacity"]
  options.push("--redis-url", "--clock-skew", "--rate-on-error")
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!options.includes(arg)) fail(arg.startsWith("-") ? `unknown option ${arg}` : `unexpected argument ${arg}`)
    if (argv.indexOf(arg) !== i) fail(`${arg} given twice`)
    i++ // its value, checked below
  }
  const portText = get("port") ?? "8080"
  const port = /^\d{1,5}$/.test(portText) && Number(portText) <= 65535 ? Number(portText) : fail("bad --port")
  const store = get("store") ?? "memory"
  if (!["memory", "sqlite", "postgres", "redis"].includes(store)) fail(`unknown --store ${store}`)
  const rateText = get("rate") ?? "1000:1000"
  const match = /^(\d+):(\d+(?:\.\d+)?)$/.exec(rateText)
  const rate = match !== null && Number(match[1]) >= 1 && Number(match[2]) > 0
    ? { capacity: Number(match[1]), refill: Number(match[2]) }
    : fail("bad --rate, expected <capacity>:<refillPerSecond>, e.g. 20:5")
  const leaseText = get("lease") ?? "60000"
  const leaseMillis = /^\d{1,9}$/.test(leaseText) && Number(leaseText) > 0 ? Number(leaseText) : fail("bad --lease")
  const keysText = get("api-keys")
  const apiKeys = keysText === undefined ? undefined : new Map(
    keysText.split(",").map((pair) => {
      const [key, customer, ...rest] = pair.split("=")
      return key && customer && rest.length === 0
        ? [key, customer] as const
        : fail("bad --api-keys, expected <key>=<customer>,... e.g. k1=alice,k2=bob")
    })
  )
  const shedText = get("shed")
  if (shedText !== undefined && shedText !== "adaptive" && shedText !== "gradient2") {
    fail(`unknown --shed ${shedText}, expected adaptive or gradient2`)
  }
  const capacityText = get("capacity")
  const capacityMatch = capacityText === undefined ? undefined : /^(\d{1,4}):(\d{1,6})$/.exec(capacityText)
  const capacity = capacityText === undefined
    ? undefined
    : capacityMatch !== null && capacityMatch !== undefined && Number(capacityMatch[1]) >= 1
    ? { concurrency: Number(capacityMatch[1]), serviceMillis: Number(capacityMatch[2]) }
    : fail("bad --capacity, expected <concurrency>:<ms per request>, e.g. 4:20")
  const redisUrlText = get("redis-url")
  if (redisUrlText !== undefined && !/^rediss?:\/\//.test(redisUrlText)) fail("bad --redis-url, expected redis://…")
  const skewText = get("clock-skew") ?? "0"
  const clockSkewMillis = /^-?\d{1,7}$/.test(skewText) ? Number(skewText) : fail("bad --clock-skew, expected <ms>")
  const rateOnError = get("rate-on-error") ?? "deny"
  if (rateOnError !== "allow" && rateOnError !== "deny") fail(`unknown --rate-on-error ${rateOnError}`)
  return {
    redisUrl: redisUrlText,
    clockSkewMillis,
    rateOnError: rateOnError as ServeArgs["rateOnError"],
    shed: shedText !== undefined,
    shedAlgorithm: shedText === "gradient2" ? "gradient2" : "default",
    capacity,
    port,
    store: store as ServeArgs["store"],
    db: get("db") ?? "orders-idempotency.db",
    rate,
    leaseMillis,
    apiKeys
  }
}

export const databaseUrl = () => process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
export const redisUrl = () => process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"
