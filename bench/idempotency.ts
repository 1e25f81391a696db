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
    // a pool sized for the load: one connection per request in flight (pg's default is 10)
    maxConnections: IN_FLIGHT
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

/** node-postgres (what @effect/sql-pg runs on), a pool of 32, 32 workers. */
const floorPostgres = async (): Promise<number> => {
  const pg = require("pg")
  const pool = new pg.Pool({
    connectionString: pgUrl,
    max: IN_FLIGHT
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
    const pool = new pg.Pool({ connectionString: pgUrl, max: IN_FLIGHT })
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
      Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: IN_FLIGHT }))
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
export const targets: ReadonlyArray<readonly [string, string, number]> = []

/** ns per request for each variant (so --json keeps its `{ cases: { name: nsPerOp } }` shape). */
/**
 * The no-middleware rate measured just before and just after each variant (their mean): on a shared
 * machine the load drifts during a run, and a ratio is only as good as the baseline it is taken against.
 */
const baselines = new Map<string, number>()

export const extra = async (): Promise<Record<string, number>> => {
  const out: Record<string, number> = {}
  const [none, ...stores] = variants
  const noneNs = async () => 1e9 / await Effect.runPromise(serveAndLoad(false, none![2]))
  const nones: Array<number> = [await noneNs()]
  for (const [name, withMiddleware, store] of stores) {
    const result = await Effect.runPromise(Effect.either(serveAndLoad(withMiddleware, store)))
    if (result._tag === "Right") {
      out[name] = 1e9 / result.right
      nones.push(await noneNs())
      baselines.set(name, (nones[nones.length - 2]! + nones[nones.length - 1]!) / 2)
    } else if (!process.argv.includes("--json")) console.log(`${name}: skipped (${String(result.left)})`)
  }
  out[none![0]] = nones.reduce((a, b) => a + b, 0) / nones.length
  for (const [store, name, floor] of floors) {
    if (out[store] === undefined) continue
    try {
      const rate = await floor()
      out[name] = 1e9 / rate
      // an HTTP floor is a server like the no-middleware one: its ratio against the runs of that one too
      if (name.includes("no middleware")) baselines.set(name, (nones[nones.length - 1]! + await noneNs()) / 2)
    } catch (e) {
      if (!process.argv.includes("--json")) console.log(`${name}: skipped (${String(e)})`)
    }
  }
  return out
}

export const report = async (results: ReadonlyMap<string, number>): Promise<void> => {
  const base = results.get("http: no middleware")
  if (base === undefined) return
  console.log(
    `\nidempotency middleware, requests/s (${IN_FLIGHT} in flight, a new key per request; each ratio against ` +
      "the no-middleware runs just before and after it):"
  )
  for (const [name] of variants) {
    const ns = results.get(name)
    if (ns === undefined) continue
    const rps = 1e9 / ns
    const ratio = (baselines.get(name) ?? base) / ns
    const target = targets22[name]
    const verdict = target === undefined ? "" : `  target ≥ ${target}× ${ratio >= target ? "ok" : "MISSED"}`
    console.log(
      `  ${name.padEnd(34)} ${rps.toFixed(0).padStart(7)}/s  (${ratio.toFixed(2)}× of no middleware)${verdict}`
    )
    for (const [store, floor] of floors) {
      const floorNs = store === name ? results.get(floor) : undefined
      if (floorNs === undefined) continue
      console.log(
        `    ${floor.padEnd(40)} ${(1e9 / floorNs).toFixed(0).padStart(7)}/s  ` +
          `(${((baselines.get(floor) ?? base) / floorNs).toFixed(2)}× of no middleware: the most any middleware ` +
          "on it can reach)"
      )
    }
  }
}
