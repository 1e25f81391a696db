/**
 * Issues #5 and #22: requests/s through the idempotency middleware with each store, next to the same server
 * without the middleware. One in-process server on 127.0.0.1, undici with 32 requests in flight, every
 * request a new key (the worst case: a claim and a completion per request). Reported as ns/request in
 * --json; stores whose service is unreachable are skipped with a note.
 *
 * Each store's engine floor is measured beside it: its driver alone (no Effect, no HTTP) running the
 * store's two writes per request (the claim, the completion) from 32 workers, in pairs/s. No middleware
 * can serve more new keys a second than that, so `floor / no middleware` bounds the ratio a store can reach.
 */
import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted } from "effect"
import * as IdempotencyMiddleware from "effect-resilience/IdempotencyMiddleware"
import * as IdempotencyStore from "effect-resilience/IdempotencyStore"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, request } from "undici"
import type { Case } from "./harness.js"

const REQUESTS = 3_000
const IN_FLIGHT = 32
const PAIRS = 3_000
/**
 * PostgreSQL's pool, for the store and its floors alike: sized for the server, not for the requests in flight.
 * Every statement here is a commit; with one connection per request in flight (32), 32 backends take turns on the
 * machine's 2 CPUs. In alternating runs 8 served a little more than 32 and 4 no more than 8 (docs/stores.md:
 * within this machine's noise, and no loss). Requests beyond the pool wait for a connection in the client.
 */
const PG_POOL = 8
const pgUrl = process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"

/** requests/s with the middleware ÷ without, at least (issue #22) */
const targets22: Record<string, number> = {
  "http: idempotency (memory)": 0.6,
  "http: idempotency (redis)": 0.5,
  "http: idempotency (sqlite)": 0.3,
  "http: idempotency (postgres)": 0.25
}

const handler = Effect.succeed(HttpServerResponse.unsafeJson({ id: 1 }, { status: 201 }))

const load = async (port: number): Promise<number> => {
  const agent = new Agent({ connections: IN_FLIGHT })
  const url = `http://127.0.0.1:${port}/orders`
  let next = 0
  const worker = async () => {
    while (next < REQUESTS) {
      next++
      const response = await request(url, {
        method: "POST",
        dispatcher: agent,
        headers: { "content-type": "application/json", "idempotency-key": randomUUID() },
        body: "{\"sku\":\"A\"}"
      })
      await response.body.dump()
      if (response.statusCode !== 201) throw new Error(`status ${response.statusCode}`)
    }
  }
  await Promise.all(Array.from({ length: 100 }, worker).slice(0, IN_FLIGHT)) // warm-up included below
  next = 0
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  await agent.close()
  return REQUESTS / seconds
}

const serveAndLoad = (
  withMiddleware: boolean,
  store: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>,
  route: typeof handler = handler
) =>
  Effect.gen(function*() {
    const idempotent = yield* IdempotencyMiddleware.make()
    const app = HttpRouter.empty.pipe(HttpRouter.post("/orders", withMiddleware ? route.pipe(idempotent) : route))
    yield* HttpServer.serveEffect(app)
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.promise(() => load(port))
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.merge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }), store))
  )

const sqlite = Layer.unwrapScoped(Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "bench-idem-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => IdempotencyStoreSql.layer().pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "idem.db") })))
))
const postgres = IdempotencyStoreSql.layer({ table: "bench_idempotency" }).pipe(
  Layer.provide(PgClient.layer({
    url: Redacted.make(pgUrl),
    maxConnections: PG_POOL
  }))
)
const redis = IdempotencyStoreRedis.layer({
  url: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
  prefix: `bench-idem-${process.pid}:`
})

// every request a new key, from one client scope: the default bounds (10,000 records, a tenth per scope)
// would refuse keys after the first thousand
const memory = IdempotencyStore.layerMemoryWith({ maxRecords: Infinity })

/**
 * `--stores sqlite,postgres` (after `--only idempotency`) measures only those stores and their floors, for
 * shorter runs while working on one store; the no-middleware baseline is always measured.
 */
const storesArg = process.argv.indexOf("--stores")
const picked = storesArg === -1 ? undefined : (process.argv[storesArg + 1] ?? "").split(",")
const pickedStore = (name: string): boolean =>
  picked === undefined || picked.some((store) => name === `http: idempotency (${store})`)

const allVariants: ReadonlyArray<
  readonly [string, boolean, Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>]
> = [
  ["http: no middleware", false, memory],
  ["http: idempotency (memory)", true, memory],
  ["http: idempotency (sqlite)", true, sqlite],
  ["http: idempotency (postgres)", true, postgres],
  ["http: idempotency (redis)", true, redis]
]
const variants = allVariants.filter(([name], i) => i === 0 || pickedStore(name))

/** Runs `pair` (a claim and a completion for key `i`) `PAIRS` times from `workers` workers; pairs/s. */
const pairsPerSecond = async (workers: number, pair: (i: number) => Promise<unknown>): Promise<number> => {
  let next = 0
  const worker = async () => {
    while (next < PAIRS) await pair(next++)
  }
  await Promise.all(Array.from({ length: workers }, worker)) // warm-up
  next = 0
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: workers }, worker))
  return PAIRS / (Number(process.hrtime.bigint() - start) / 1e9)
}

// the SQL store's two writes for a new key, as it sends them (src/internal/idempotencyStore/sql.ts)
const upsert = (table: string, p: (n: number) => string) =>
  `INSERT INTO ${table} (scope, key, fingerprint, token, state, status, headers, body, lease_until, expires_at)
  VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, 0, NULL, NULL, NULL, ${p(5)}, ${p(6)})
  ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, token = excluded.token,
    state = excluded.state, status = NULL, headers = NULL, body = NULL, lease_until = excluded.lease_until,
    expires_at = excluded.expires_at
  WHERE ${table}.expires_at <= ${p(7)}
  RETURNING token`
const completion = (table: string, p: (n: number) => string) =>
  `UPDATE ${table} SET state = 1, status = ${p(1)}, headers = ${p(2)}, body = ${p(3)}, lease_until = 0,
    expires_at = ${p(4)}
  WHERE scope = ${p(5)} AND key = ${p(6)} AND token = ${p(7)} AND state = 0 AND expires_at > ${p(8)}
  RETURNING token`
const schema = (table: string, blob: string) => [
  `CREATE TABLE IF NOT EXISTS ${table} (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    token TEXT NOT NULL, state SMALLINT NOT NULL, status INTEGER, headers TEXT, body ${blob},
    lease_until BIGINT NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (scope, key))`,
  `CREATE INDEX IF NOT EXISTS ${table}_expires_at ON ${table} (expires_at)`
]
const scope = "f".repeat(64)
const fingerprint = "e".repeat(64)
const body = Buffer.from("{\"id\":1}")
const headers = "{\"content-type\":\"application/json\"}"
const require = createRequire(import.meta.url)

/** better-sqlite3 (what @effect/sql-sqlite-node runs on), synchronous: one connection, one pair at a time. */
const floorSqlite = async (): Promise<number> => {
  const Sqlite = require("better-sqlite3")
  const dir = mkdtempSync(join(tmpdir(), "bench-idem-floor-"))
  const db = new Sqlite(join(dir, "floor.db"))
  try {
    db.pragma("journal_mode = WAL") // as SqliteClient opens it
    for (const statement of schema("floor", "BLOB")) db.exec(statement)
    const claim = db.prepare(upsert("floor", () => "?"))
    const complete = db.prepare(completion("floor", () => "?"))
    const run = `${process.pid}-`
    return await pairsPerSecond(1, async (i) => {
      const key = run + i
      const now = Date.now()
      const token = randomUUID()
      claim.all(scope, key, fingerprint, token, now + 60_000, now + 86_400_000, now)
      complete.all(201, headers, body, now + 86_400_000, scope, key, token, now)
    })
  } finally {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The no-middleware server whose handler runs the SQL store's two statements itself through `@effect/sql`
 * (`SqliteClient`, as the store does), in requests/s: what the SQL client costs a request before any store or
 * middleware code, so no middleware on that client serves more than this.
 */
const floorSqliteHttp = async (): Promise<number> => {
  const dir = mkdtempSync(join(tmpdir(), "bench-idem-floor-http-"))
  try {
    return await Effect.runPromise(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        for (const statement of schema("floor_http", "BLOB")) yield* sql.unsafe(statement)
        const claim = upsert("floor_http", () => "?")
        const complete = completion("floor_http", () => "?")
        const run = `${process.pid}-`
        let i = 0
        const pair = Effect.suspend(() => {
          const key = run + i++
          const now = Date.now()
          const token = randomUUID()
          return Effect.zipRight(
            sql.unsafe(claim, [scope, key, fingerprint, token, now + 60_000, now + 86_400_000, now]),
            sql.unsafe(complete, [201, headers, body, now + 86_400_000, scope, key, token, now])
          )
        })
        return yield* serveAndLoad(false, memory, Effect.zipRight(Effect.orDie(pair), handler))
      }).pipe(Effect.provide(SqliteClient.layer({ filename: join(dir, "floor.db") })))
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** node-postgres (what @effect/sql-pg runs on), the same pool (`PG_POOL`), 32 workers. */
const floorPostgres = async (): Promise<number> => {
  const pg = require("pg")
  const pool = new pg.Pool({
    connectionString: pgUrl,
    max: PG_POOL
  })
  try {
    for (const statement of schema("bench_idempotency_floor", "BYTEA")) await pool.query(statement)
    const claim = upsert("bench_idempotency_floor", (n) => `$${n}`)
    const complete = completion("bench_idempotency_floor", (n) => `$${n}`)
    const run = `${process.pid}-${Date.now()}-`
    return await pairsPerSecond(IN_FLIGHT, async (i) => {
      const key = run + i
      const now = Date.now()
      const token = randomUUID()
      await pool.query(claim, [scope, key, fingerprint, token, now + 60_000, now + 86_400_000, now])
      await pool.query(complete, [201, headers, body, now + 86_400_000, scope, key, token, now])
    })
  } finally {
    await pool.end()
  }
}

/**
 * The no-middleware server whose handler runs the SQL store's two statements itself on PostgreSQL, in
 * requests/s: through raw node-postgres (a pool of 32), or through `@effect/sql-pg` (`PgClient`, as the store
 * does, same pool size). PostgreSQL runs on the same machine, so what it spends is taken from the server too:
 * no middleware on it serves more than the first, nor on `@effect/sql-pg` more than the second.
 */
const floorPostgresHttp = (via: "pg" | "@effect/sql-pg") => async (): Promise<number> => {
  const table = via === "pg" ? "bench_idempotency_floor_http" : "bench_idempotency_floor_sql"
  const claim = upsert(table, (n) => `$${n}`)
  const complete = completion(table, (n) => `$${n}`)
  const run = `${process.pid}-${Date.now()}-`
  let i = 0
  const params = () => {
    const key = run + i++
    const now = Date.now()
    const token = randomUUID()
    return [
      [scope, key, fingerprint, token, now + 60_000, now + 86_400_000, now],
      [201, headers, body, now + 86_400_000, scope, key, token, now]
    ] as const
  }
  if (via === "pg") {
    const pg = require("pg")
    const pool = new pg.Pool({ connectionString: pgUrl, max: PG_POOL })
    try {
      for (const statement of schema(table, "BYTEA")) await pool.query(statement)
      const pair = Effect.promise(async () => {
        const [first, second] = params()
        await pool.query(claim, first)
        await pool.query(complete, second)
      })
      return await Effect.runPromise(serveAndLoad(false, memory, Effect.zipRight(pair, handler)))
    } finally {
      await pool.end()
    }
  }
  return await Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const statement of schema(table, "BYTEA")) yield* sql.unsafe(statement)
      const pair = Effect.suspend(() => {
        const [first, second] = params()
        return Effect.zipRight(sql.unsafe(claim, first), sql.unsafe(complete, second))
      })
      return yield* serveAndLoad(false, memory, Effect.zipRight(Effect.orDie(pair), handler))
    }).pipe(
      Effect.scoped,
      Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: PG_POOL }))
    )
  )
}

// the Redis store's scripts' work for a new key (src/internal/idempotencyStore/redis.ts), without its checks
const redisClaim = `local r = redis.call("HMGET", KEYS[1], "fp", "done", "lease", "exp")
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1], "fp", ARGV[1], "tok", ARGV[2], "done", "0", "lease", ARGV[3], "exp", ARGV[4])
redis.call("PEXPIRE", KEYS[1], 90000000)
return {0}`
const redisComplete = `local r = redis.call("HMGET", KEYS[1], "tok", "done", "exp")
if r[1] ~= ARGV[1] then return 0 end
redis.call("HSET", KEYS[1], "done", "1", "lease", "0", "exp", ARGV[2], "status", ARGV[3], "headers", ARGV[4], "body", ARGV[5])
redis.call("PEXPIRE", KEYS[1], 90000000)
return 1`

/** ioredis, one connection, 32 workers, two `EVALSHA` per pair doing the store's scripts' work. */
const floorRedis = async (): Promise<number> => {
  const client = new Redis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379", { lazyConnect: true })
  try {
    await client.connect()
    const claimSha = String(await client.script("LOAD", redisClaim))
    const completeSha = String(await client.script("LOAD", redisComplete))
    const prefix = `bench-idem-floor-${process.pid}:`
    return await pairsPerSecond(IN_FLIGHT, async (i) => {
      const key = prefix + i
      const now = Date.now()
      const token = randomUUID()
      await client.evalsha(claimSha, 1, key, fingerprint, token, String(now + 60_000), String(now + 86_400_000))
      await client.evalsha(completeSha, 1, key, token, String(now + 86_400_000), "201", headers, body)
    })
  } finally {
    client.disconnect()
  }
}

/**
 * The same server as the no-middleware case, its handler sending the Redis store's two scripts per request
 * itself (raw ioredis, auto-pipelined as the store's own client, one after the other as the middleware must:
 * the completion only once the handler has answered), in requests/s. Redis runs on the same machine as this
 * process, so what it spends is taken from the server too: no middleware on Redis serves more than this.
 */
const floorRedisHttp = async (): Promise<number> => {
  const client = new Redis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379", {
    lazyConnect: true,
    enableAutoPipelining: true
  })
  try {
    await client.connect()
    const claimSha = String(await client.script("LOAD", redisClaim))
    const completeSha = String(await client.script("LOAD", redisComplete))
    const prefix = `bench-idem-floor-http-${process.pid}:`
    let i = 0
    const pair = Effect.promise(async () => {
      const key = prefix + i++
      const now = Date.now()
      const token = randomUUID()
      await client.evalsha(claimSha, 1, key, fingerprint, token, String(now + 60_000), String(now + 86_400_000))
      await client.evalsha(completeSha, 1, key, token, String(now + 86_400_000), "201", headers, body)
    })
    return await Effect.runPromise(serveAndLoad(false, memory, Effect.zipRight(pair, handler)))
  } finally {
    client.disconnect()
  }
}

const floors: ReadonlyArray<readonly [string, string, () => Promise<number>]> = [
  ["http: idempotency (sqlite)", "floor: better-sqlite3 claim+complete pair", floorSqlite],
  ["http: idempotency (sqlite)", "floor: no middleware + @effect/sql pair", floorSqliteHttp],
  ["http: idempotency (postgres)", "floor: node-postgres claim+complete pair", floorPostgres],
  ["http: idempotency (postgres)", "floor: no middleware + raw node-postgres pair", floorPostgresHttp("pg")],
  ["http: idempotency (postgres)", "floor: no middleware + @effect/sql-pg pair", floorPostgresHttp("@effect/sql-pg")],
  ["http: idempotency (redis)", "floor: ioredis claim+complete pair", floorRedis],
  ["http: idempotency (redis)", "floor: no middleware + raw ioredis pair", floorRedisHttp]
]

export const cases: ReadonlyArray<Case> = []
/** [case, reference, at least, "throughput"]: requests/s with the middleware ÷ without (issue #22) */
export const targets: ReadonlyArray<readonly [string, string, number, "throughput"]> = Object.entries(targets22).map((
  [name, atLeast]
) => [name, "http: no middleware", atLeast, "throughput"] as const)

/**
 * Each store's (and each HTTP floor's) ratio to the no-middleware rate measured just before and just after it
 * (their mean), one per round: on a shared machine the load drifts during a run, and a ratio is only as good as
 * the baseline it is taken against. `--rounds N` (default 3) measures every store and HTTP floor N times in
 * turn; the report gives the median ratio and the range. Three by default: in a whole `npm run bench` the first
 * round after the other suites came out lower than the next ones (memory 0.58x against 0.74-1.08x), and one
 * round judged the 0.6x and 0.3x lines by that.
 */
const ratios = new Map<string, Array<number>>()
const roundsArg = process.argv.indexOf("--rounds")
const rounds = roundsArg === -1 ? 3 : Math.max(1, Number(process.argv[roundsArg + 1]) || 1)

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** ns per request for each variant (so --json keeps its `{ cases: { name: nsPerOp } }` shape): the medians. */
export const extra = async (): Promise<Record<string, number>> => {
  const samples = new Map<string, Array<number>>()
  const record = (name: string, ns: number, baselineNs: number | undefined) => {
    samples.set(name, [...samples.get(name) ?? [], ns])
    if (baselineNs !== undefined) ratios.set(name, [...ratios.get(name) ?? [], baselineNs / ns])
  }
  const [none, ...stores] = variants
  const noneNs = async () => 1e9 / await Effect.runPromise(serveAndLoad(false, none![2]))
  const nones: Array<number> = [await noneNs()]
  const skipped = new Set<string>()
  const skip = (name: string, why: unknown) => {
    skipped.add(name)
    if (!process.argv.includes("--json")) console.log(`${name}: skipped (${String(why)})`)
  }
  for (let round = 0; round < rounds; round++) {
    for (const [name, withMiddleware, store] of stores) {
      if (skipped.has(name)) continue
      const result = await Effect.runPromise(Effect.either(serveAndLoad(withMiddleware, store)))
      if (result._tag === "Left") {
        skip(name, result.left)
        continue
      }
      nones.push(await noneNs())
      record(name, 1e9 / result.right, (nones[nones.length - 2]! + nones[nones.length - 1]!) / 2)
    }
    for (const [store, name, floor] of floors) {
      if (skipped.has(store) || skipped.has(name) || !samples.has(store)) continue
      // a driver-only floor is measured once; an HTTP floor (a server like the no-middleware one) each round
      const http = name.includes("no middleware")
      if (!http && round > 0) continue
      try {
        const ns = 1e9 / await floor()
        if (http) nones.push(await noneNs())
        record(name, ns, http ? (nones[nones.length - 2]! + nones[nones.length - 1]!) / 2 : undefined)
      } catch (e) {
        skip(name, e)
      }
    }
  }
  const out: Record<string, number> = { [none![0]]: nones.reduce((a, b) => a + b, 0) / nones.length }
  for (const [name, values] of samples) out[name] = median(values)
  return out
}

/** The median of a case's ratios to the no-middleware runs around it, once `extra` ran (the judged ratio). */
export const pairedRatio = (name: string): number | undefined => {
  const values = ratios.get(name)
  return values === undefined || values.length === 0 ? undefined : median(values)
}

/** "0.31× (0.27–0.39 over 3 rounds)", or just "0.31×" after one. */
const ratioText = (name: string, fallback: number): string => {
  const values = ratios.get(name)
  if (values === undefined || values.length === 0) return `${fallback.toFixed(2)}×`
  if (values.length === 1) return `${values[0]!.toFixed(2)}×`
  return `${median(values).toFixed(2)}× (${Math.min(...values).toFixed(2)}–${
    Math.max(...values).toFixed(2)
  } over ${values.length} rounds)`
}

export const report = async (results: ReadonlyMap<string, number>): Promise<void> => {
  const base = results.get("http: no middleware")
  if (base === undefined) return
  console.log(
    `\nidempotency middleware, requests/s (${IN_FLIGHT} in flight, a new key per request; median of the rounds; ` +
      "each ratio against the no-middleware runs just before and after it):"
  )
  for (const [name] of variants) {
    const ns = results.get(name)
    if (ns === undefined) continue
    const rps = 1e9 / ns
    const values = ratios.get(name)
    const ratio = values === undefined ? base / ns : median(values)
    const target = targets22[name]
    const verdict = target === undefined ? "" : `  target ≥ ${target}× ${ratio >= target ? "ok" : "MISSED"}`
    console.log(
      `  ${name.padEnd(34)} ${rps.toFixed(0).padStart(7)}/s  (${ratioText(name, ratio)} of no middleware)${verdict}`
    )
    for (const [store, floor] of floors) {
      const floorNs = store === name ? results.get(floor) : undefined
      if (floorNs === undefined) continue
      console.log(
        `    ${floor.padEnd(40)} ${(1e9 / floorNs).toFixed(0).padStart(7)}/s  ` +
          `(${ratioText(floor, base / floorNs)} of no middleware: the most any middleware on it can reach)`
      )
    }
  }
}
