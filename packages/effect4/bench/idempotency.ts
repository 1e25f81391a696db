/**
 * Issues #5 and #22: requests/s through the idempotency middleware with each store, against the same server without
 * the middleware. One in-process server on 127.0.0.1 (`@effect/platform-node`), undici with 32 requests in flight,
 * every request a new key (the worst case: a claim and a completion per request). Targets: memory ≥ 0.6×, Redis
 * ≥ 0.5×, SQLite ≥ 0.3×, PostgreSQL ≥ 0.25× of the no-middleware rate. Stores whose service is unreachable are
 * skipped with a note.
 *
 * Each store's ratio is taken against the no-middleware runs just before and after it (their mean), once per round,
 * and the median of the rounds kept (`--rounds N`, default 3): on a shared machine the load drifts during a run. The
 * floors beside a store (reported, not judged) bound what any middleware on it can reach: its driver alone running
 * the store's two writes per request (the claim, the completion), and the no-middleware server whose handler runs
 * those two writes itself. `--stores sqlite,postgres` measures only those stores (the baseline always).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import * as IdempotencyMiddleware from "effect-resilience/IdempotencyMiddleware"
import * as IdempotencyStore from "effect-resilience/IdempotencyStore"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import * as Sqlite from "effect-resilience/Sqlite"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import * as SqlClient from "effect/sql/SqlClient"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { Agent, request } from "undici"
import { redisUrl } from "../../../bench/redis.js"
import { type Comparison, median, option, type Suite } from "../../../bench/report.js"

const REQUESTS = 3_000
const IN_FLIGHT = 32
const PAIRS = 3_000
/** PostgreSQL's pool, for the store and its floors alike: sized for the server (see the Effect 3 bench). */
const PG_POOL = 8
const pgUrl = process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
const NONE = "http: no middleware"

/** requests/s with the middleware ÷ without, at least (issue #22) */
const targets: Record<string, number> = {
  "http: idempotency (memory)": 0.6,
  "http: idempotency (redis)": 0.5,
  "http: idempotency (sqlite)": 0.3,
  "http: idempotency (postgres)": 0.25
}

const handler = Effect.succeed(HttpServerResponse.jsonUnsafe({ id: 1 }, { status: 201 }))
type Handler = typeof handler

/** requests/s of `IN_FLIGHT` undici workers posting a new key each, after a warm-up of the same size. */
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
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker)) // warm-up
  next = 0
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  await agent.close()
  return REQUESTS / seconds
}

type StoreLayer = Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>

const serveAndLoad = (withMiddleware: boolean, store: StoreLayer, route: Handler = handler) =>
  Effect.gen(function*() {
    const idempotent = yield* IdempotencyMiddleware.make()
    const router = yield* HttpRouter.make
    yield* router.add("POST", "/orders", withMiddleware ? idempotent(route) : route)
    yield* HttpServer.serveEffect(router.asHttpEffect())
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "UnixPathAddress" ? 0 : server.address.port
    return yield* Effect.promise(() => load(port))
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.merge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }), store))
  )

const tempDir = (what: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), what))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

const sqlite: StoreLayer = Layer.unwrap(Effect.map(
  tempDir("bench-idem-"),
  (dir) => IdempotencyStoreSql.layer().pipe(Layer.provide(Sqlite.layer({ filename: join(dir, "idem.db") })))
))
const pgClient = () =>
  PgClient.layer({ url: Redacted.make(pgUrl), connectTimeout: "2 seconds", maxConnections: PG_POOL })
const postgres: StoreLayer = IdempotencyStoreSql.layer({ table: "bench_idempotency" }).pipe(Layer.provide(pgClient()))
const redis: StoreLayer = IdempotencyStoreRedis.layer({ url: redisUrl(), prefix: `bench-idem-${process.pid}:` })
// every request a new key, from one client scope: the default bounds (10,000 records, a tenth per scope) would
// refuse keys after the first thousand
const memory: StoreLayer = IdempotencyStore.layerMemoryWith({ maxRecords: Infinity })

const pickedStores = option("stores", "").split(",").filter((s) => s.length > 0)
const allVariants: ReadonlyArray<readonly [string, StoreLayer]> = [
  ["http: idempotency (memory)", memory],
  ["http: idempotency (sqlite)", sqlite],
  ["http: idempotency (postgres)", postgres],
  ["http: idempotency (redis)", redis]
]
const variants = allVariants.filter(([name]) =>
  pickedStores.length === 0 || pickedStores.some((store) => name === `http: idempotency (${store})`)
)

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
const pairParams = (run: string, i: number) => {
  const key = run + i
  const now = Date.now()
  const token = randomUUID()
  return [
    [scope, key, fingerprint, token, now + 60_000, now + 86_400_000, now],
    [201, headers, body, now + 86_400_000, scope, key, token, now]
  ] as const
}

/** `node:sqlite` (what effect-resilience/Sqlite runs on), synchronous: one connection, one pair at a time. */
const floorSqlite = async (): Promise<number> => {
  const dir = mkdtempSync(join(tmpdir(), "bench-idem-floor-"))
  const db = new DatabaseSync(join(dir, "floor.db"))
  try {
    db.exec("PRAGMA journal_mode = WAL")
    for (const statement of schema("floor", "BLOB")) db.exec(statement)
    const claim = db.prepare(upsert("floor", () => "?"))
    const complete = db.prepare(completion("floor", () => "?"))
    const run = `${process.pid}-`
    return await pairsPerSecond(1, async (i) => {
      const [first, second] = pairParams(run, i)
      claim.all(...first)
      complete.all(...second)
    })
  } finally {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The no-middleware server whose handler runs the SQL store's two statements itself through `effect/sql` on the
 * given client, in requests/s: no middleware on that client serves more than this.
 */
const floorSqlHttp = <E>(
  table: string,
  blob: string,
  placeholder: (n: number) => string,
  client: Layer.Layer<SqlClient.SqlClient, E>
) =>
() =>
  Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const statement of schema(table, blob)) yield* sql.unsafe(statement)
      const claim = upsert(table, placeholder)
      const complete = completion(table, placeholder)
      const run = `${process.pid}-${Date.now()}-`
      let i = 0
      const pair = Effect.suspend(() => {
        const [first, second] = pairParams(run, i++)
        return Effect.andThen(sql.unsafe(claim, first), sql.unsafe(complete, second))
      })
      return yield* serveAndLoad(false, memory, Effect.andThen(Effect.orDie(pair), handler))
    }).pipe(Effect.provide(client))
  )

const sqliteHttpClient = Layer.unwrap(Effect.map(
  tempDir("bench-idem-floor-http-"),
  (dir) => Sqlite.layer({ filename: join(dir, "floor.db") })
))

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

const redisPair = async (enableAutoPipelining: boolean) => {
  const client = new Redis(redisUrl(), { lazyConnect: true, enableAutoPipelining })
  await client.connect()
  const claimSha = String(await client.script("LOAD", redisClaim))
  const completeSha = String(await client.script("LOAD", redisComplete))
  const prefix = `bench-idem-floor-${process.pid}-${enableAutoPipelining}:`
  const pair = async (i: number) => {
    const key = prefix + i
    const now = Date.now()
    const token = randomUUID()
    await client.evalsha(claimSha, 1, key, fingerprint, token, String(now + 60_000), String(now + 86_400_000))
    await client.evalsha(completeSha, 1, key, token, String(now + 86_400_000), "201", headers, body)
  }
  return { client, pair }
}

/** ioredis, one connection, 32 workers, two `EVALSHA` per pair doing the store's scripts' work. */
const floorRedis = async (): Promise<number> => {
  const { client, pair } = await redisPair(false)
  try {
    return await pairsPerSecond(IN_FLIGHT, pair)
  } finally {
    client.disconnect()
  }
}

/** The no-middleware server whose handler sends the two scripts itself (auto-pipelined, as the store's client). */
const floorRedisHttp = async (): Promise<number> => {
  const { client, pair } = await redisPair(true)
  try {
    let i = 0
    return await Effect.runPromise(
      serveAndLoad(false, memory, Effect.andThen(Effect.promise(() => pair(i++)), handler))
    )
  } finally {
    client.disconnect()
  }
}

const floors: ReadonlyArray<readonly [store: string, name: string, run: () => Promise<number>]> = [
  ["http: idempotency (sqlite)", "floor: node:sqlite claim+complete pair", floorSqlite],
  [
    "http: idempotency (sqlite)",
    "floor: no middleware + effect/sql (Sqlite) pair",
    floorSqlHttp("floor_http", "BLOB", () => "?", sqliteHttpClient)
  ],
  [
    "http: idempotency (postgres)",
    "floor: no middleware + @effect/sql-pg pair",
    floorSqlHttp("bench_idempotency_floor_sql", "BYTEA", (n) => `$${n}`, pgClient())
  ],
  ["http: idempotency (redis)", "floor: ioredis claim+complete pair", floorRedis],
  ["http: idempotency (redis)", "floor: no middleware + raw ioredis pair", floorRedisHttp]
]

export const suite: Suite = {
  name: "idempotency",
  run: async () => {
    const rounds = Math.max(1, Number(option("rounds", "3")) || 1)
    const samples = new Map<string, Array<number>>()
    const ratios = new Map<string, Array<number>>()
    const notes: Array<string> = []
    const record = (name: string, ns: number, baselineNs: number | undefined) => {
      samples.set(name, [...samples.get(name) ?? [], ns])
      if (baselineNs !== undefined) ratios.set(name, [...ratios.get(name) ?? [], baselineNs / ns])
    }
    const noneNs = async () => 1e9 / await Effect.runPromise(serveAndLoad(false, memory))
    const nones: Array<number> = [await noneNs()]
    /** the mean of the last two no-middleware runs: the ones just before and after the case */
    const around = () => (nones[nones.length - 2]! + nones[nones.length - 1]!) / 2
    const skipped = new Set<string>()
    const skip = (name: string, why: unknown) => {
      skipped.add(name)
      notes.push(`${name}: skipped (${String(why).split("\n")[0]})`)
    }
    for (let round = 0; round < rounds; round++) {
      for (const [name, store] of variants) {
        if (skipped.has(name)) continue
        const result = await Effect.runPromise(Effect.result(serveAndLoad(true, store)))
        if (result._tag === "Failure") {
          skip(name, result.failure)
          continue
        }
        nones.push(await noneNs())
        record(name, 1e9 / result.success, around())
      }
      for (const [store, name, floor] of floors) {
        if (skipped.has(store) || skipped.has(name) || !samples.has(store)) continue
        // a driver-only floor is measured once; an HTTP floor (a server like the no-middleware one) each round
        const http = name.includes("no middleware")
        if (!http && round > 0) continue
        try {
          const ns = 1e9 / await floor()
          if (http) nones.push(await noneNs())
          record(name, ns, http ? around() : undefined)
        } catch (e) {
          skip(name, e)
        }
      }
    }
    const noneMean = nones.reduce((a, b) => a + b, 0) / nones.length
    const cases: Record<string, number> = { [NONE]: noneMean }
    for (const [name, values] of samples) cases[name] = median(values)
    const comparisons: Array<Comparison> = []
    for (const [name, values] of ratios) {
      const floorOf = floors.find(([, floor]) => floor === name)
      const target = targets[name]
      comparisons.push({
        case: name,
        baseline: NONE,
        kind: "throughput",
        ratio: median(values),
        ...(target === undefined ? {} : { target: { atLeast: target } }),
        note: `${
          values.length === 1 ?
            "one round" :
            `median of ${values.length} rounds (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`
        }, each against the no-middleware runs just before and after it${
          floorOf === undefined ? "" : `; the most any middleware on ${floorOf[0].slice(19, -1)} can reach`
        }`
      })
    }
    for (const [store, name] of floors) {
      const ns = cases[name]
      if (ns === undefined || ratios.has(name)) continue
      comparisons.push({
        case: name,
        baseline: NONE,
        kind: "throughput",
        ratio: noneMean / ns,
        note: `the store's driver alone: the most any middleware on ${store.slice(19, -1)} can reach`
      })
    }
    notes.push(`${IN_FLIGHT} requests in flight, a new key per request; ${REQUESTS} requests a run`)
    return { cases, comparisons, notes }
  }
}
