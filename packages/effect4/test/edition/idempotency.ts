/**
 * The idempotency suites (Idempotency*.test.ts, idempotency*.test.ts): the middleware's and the stores' internals
 * they reach, and what Effect 3 and Effect 4 spell differently around them (a fiber-local value, the SQL clients).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Cause, Context, Duration, Effect, Layer, Logger, Option, Redacted, type Scope } from "effect"
import { HttpRouter, HttpServer, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type { Connection as SqlConnection } from "effect/sql/SqlConnection"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"
import { IdempotencyMiddleware, IdempotencyStore } from "../../src/index.js"
import * as Sqlite from "../../src/Sqlite.js"
import { portOf } from "../support/nodeServer.js"
import type { DurationInput } from "./effect.js"

/** The request fingerprint the stores are given (internal in both editions). */
export { fingerprint } from "../../src/internal/http/idempotencyHttp.js"

/** The middleware's lease renewals, one fiber for all claims (internal in both editions). */
export { Leases } from "../../src/internal/http/idempotencyLeases.js"

/**
 * A value a fiber carries and its children inherit, `initial` until `locally` sets it (Effect 3: a `FiberRef` and
 * `Effect.locally`; Effect 4: a `Context.Reference` and `Effect.provideService`).
 */
export const fiberLocal = <A>(key: string, initial: A) => {
  const reference = Context.Reference<A>(key, { defaultValue: () => initial })
  return {
    get: Effect.service(reference) as Effect.Effect<A>,
    locally: (value: A) => <B, E, R>(self: Effect.Effect<B, E, R>): Effect.Effect<B, E, R> =>
      Effect.provideService(self, reference, value)
  }
}

/** A `Duration` from any input Duration functions accept (Effect 3: `Duration.decode`). */
export const durationOf = (input: Duration.Input): Duration.Duration => Duration.fromInputUnsafe(input)

/**
 * The request a server hands the app for the web request `web`, from the client address `from` (`null`: none)
 * (Effect 3: `fromWeb(web).modify({ remoteAddress: from })`; Effect 4: `remoteAddress` is an `Option`).
 */
export const serverRequestFrom = (web: Request, from: string | null): HttpServerRequest.HttpServerRequest => {
  const request = HttpServerRequest.fromWeb(web)
  return from === null ? request : request.modify({ remoteAddress: Option.some(from) })
}

/** The response a server gives for a handler's failure (both: `HttpServerError.causeResponse`, then its response). */
export const causeResponse = <E>(cause: Cause.Cause<E>): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.map(HttpServerError.causeResponse(cause), ([response]) => response)

/** The Redis key of one record (internal in both editions). */
export { keyOf as redisKeyOf } from "../../src/internal/idempotencyStore/redis.js"

// ---- SQL: the modules, the SQLite and PostgreSQL clients, a connection's failure ----

/** Effect's SQL modules (Effect 3: `@effect/sql/*`; Effect 4: `effect/sql/*`). */
export * as SqlClient from "effect/sql/SqlClient"
export type { Connection as SqlConnection } from "effect/sql/SqlConnection"

/** The SQLite options the suites use (both editions' drivers take them). */
export interface SqliteOptions {
  readonly filename: string
  readonly transformResultNames?: (name: string) => string
  readonly transformQueryNames?: (name: string) => string
}

/** A SQLite client layer (Effect 3: `@effect/sql-sqlite-node`'s `SqliteClient.layer`; Effect 4: `effect-resilience/Sqlite`). */
export const sqliteLayer = (options: SqliteOptions): Layer.Layer<SqlClient.SqlClient, unknown> => Sqlite.layer(options)

/** A SQLite client for the rest of the scope (Effect 3: `SqliteClient.make` with `Reactivity`; Effect 4: `Sqlite.make`). */
export const sqliteMake = (options: SqliteOptions): Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope> =>
  Sqlite.make(options)

/** A PostgreSQL client layer (both: `@effect/sql-pg`'s `PgClient.layer`, Effect 4's its 4.x). */
export const pgLayer = (
  options: { readonly url: string; readonly connectTimeout?: DurationInput } | {
    readonly host: string
    readonly port: number
    readonly database: string
    readonly username: string
  }
): Layer.Layer<SqlClient.SqlClient, unknown> =>
  PgClient.layer("url" in options ? { ...options, url: Redacted.make(options.url) } : options)

/** A PostgreSQL client for the rest of the scope (both: `PgClient.make` with `Reactivity`). */
export const pgMake = (url: string): Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope> =>
  PgClient.make({ url: Redacted.make(url) }).pipe(Effect.provide(Reactivity.layer))

/** A SQLite-dialect client over one connection (both: `SqlClient.make`; Effect 4 names its driver). */
export const clientOver = (connection: SqlConnection): Effect.Effect<SqlClient.SqlClient, never, Scope.Scope> =>
  SqlClient.make({
    acquirer: Effect.succeed(connection),
    compiler: Statement.makeCompilerSqlite(),
    driver: "faulty",
    spanAttributes: []
  }).pipe(Effect.provide(Reactivity.layer))

/**
 * What the PostgreSQL client reports for a backend the server terminated, SQLSTATE 57P01 (Effect 3: a `SqlError`
 * whose cause has the code; Effect 4: the code in the cause of an `UnknownError` reason).
 */
export const connectionTerminated = (): SqlError =>
  new SqlError({
    reason: new UnknownError({
      cause: Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
      message: "connection lost"
    })
  })

/** This run's PostgreSQL tables are named for it; drops them (Effect 3 also drops their `_dlq` tables). */
export { dropPgTables, freshName, PgLive } from "../support/pg.js"

/** Which services answered the probe (test/support/services.ts). */
export { available, describeWith } from "../support/services.js"

/** A SQL client's failure (Effect 3: `@effect/sql`'s `SqlError`; Effect 4: `effect/sql`'s, with a `reason`). */
export type SqlFailure = SqlError

/**
 * A PostgreSQL client over one connection reserved from the `PgClient` in context, its statements going through
 * `wrap` (both: `SqlClient.make` with `PgClient.makeCompiler`; Effect 4 names its driver).
 */
export const pgClientOver = (wrap: (connection: SqlConnection) => SqlConnection) =>
  Effect.gen(function*() {
    const pg = yield* PgClient.PgClient
    const connection = yield* pg.reserve
    return yield* SqlClient.make({
      acquirer: Effect.succeed(wrap(connection)),
      compiler: PgClient.makeCompiler(),
      driver: "wrapped",
      spanAttributes: []
    }).pipe(Effect.provide(Reactivity.layer))
  })

/** Sets a cookie on a response, throwing for a bad one (Effect 3: `HttpServerResponse.unsafeSetCookie`). */
export const setCookie: (
  name: string,
  value: string
) => (response: HttpServerResponse.HttpServerResponse) => HttpServerResponse.HttpServerResponse = (name, value) =>
  HttpServerResponse.setCookieUnsafe(name, value)

/** The middleware's background recordings: their bound and the recorder (internal in both editions). */
export { maxPendingRecordings, recorder } from "../../src/internal/http/idempotencyMiddleware.js"

/** A logger layer that keeps each log's text and, when it has one, its pretty cause (Effect 3: `Logger.replace`). */
export const captureLogsWithCause = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ cause, message }) => {
    const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
    lines.push(cause.reasons.length === 0 ? text : `${text} ${Cause.pretty(cause)}`)
  })
  return { lines, layer: Logger.layer([logger]) }
}

/**
 * An app of POST `/orders` routes, each mounted under its prefix (the URL its handler reads has lost the prefix)
 * (Effect 3: `HttpRouter.mount` of a router per prefix; Effect 4: `HttpRouter.prefixRoute`, built by `toHttpEffect`).
 */
export const mountedOrders = <E, R>(
  routes: ReadonlyArray<readonly [prefix: string, handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>]>
): Effect.Effect<Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>, never, any> =>
  HttpRouter.toHttpEffect(
    Layer.mergeAll(
      ...routes.map(([prefix, handler]) =>
        HttpRouter.addAll([HttpRouter.prefixRoute(HttpRouter.route("POST", "/orders", handler as any), prefix)])
      ) as [any]
    )
  ) as any

/**
 * Serves POST `/orders` on 127.0.0.1, wired as the edition's docs show it, over the memory store; its port (Effect 3:
 * a router whose route wraps `handler` with the middleware; Effect 4: the middleware built once in a route layer,
 * served by `HttpRouter.serve`).
 */
export const serveAsDocumented = (
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
): Effect.Effect<number, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const OrdersRoute = Layer.unwrap(Effect.gen(function*() {
      const idempotent = yield* IdempotencyMiddleware.make({ ttl: "24 hours" })
      return HttpRouter.add("POST", "/orders", handler.pipe(idempotent))
    })).pipe(Layer.provide(IdempotencyStore.layerMemory))
    const Server = HttpRouter.serve(OrdersRoute, { disableListenLog: true, disableLogger: true }).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    return yield* portOf(Context.get(yield* Layer.build(Server), HttpServer.HttpServer))
  })

/** `npm run serve` (examples/serve.ts) as separate processes, spoken to over HTTP only (test/support/serveProcess.ts). */
export { type Answer, orderCount, postOrder, request as requestServe, startServe } from "../support/serveProcess.js"

/**
 * How to start test/support/sqliteClaimer.ts (one process of the multi-process SQLite tests) with `args`: the
 * command's arguments and folder (Effect 3: `node --import tsx`, on `@effect/sql-sqlite-node`; Effect 4: plain
 * `node` with scripts/tsResolve.mjs, on `effect-resilience/Sqlite`).
 */
export const sqliteClaimer = (args: ReadonlyArray<string>) => ({
  command: process.execPath,
  args: [
    "--no-warnings",
    "--experimental-transform-types",
    "--import",
    "./scripts/tsResolve.mjs",
    "test/support/sqliteClaimer.ts",
    ...args
  ],
  cwd: fileURLToPath(new URL("../..", import.meta.url))
})
