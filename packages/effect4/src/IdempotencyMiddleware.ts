/**
 * Server middleware that makes `POST` (and `PATCH`) safe to retry: the first request with an
 * `Idempotency-Key` runs; every later request with the same key, from the same client, gets the stored
 * response back instead of running again. Semantics follow the IETF Idempotency-Key draft and Stripe's
 * documented behaviour:
 *
 * | situation | answer |
 * |---|---|
 * | key missing, empty, longer than `maxKeyLength` or not printable ASCII | 400 problem+json |
 * | body larger than `maxBodyBytes` | 413 problem+json |
 * | first request with the key | the handler runs; its answer is stored (see below) |
 * | same key while the first is still running | 409 problem+json, `Retry-After: 1` |
 * | same key, different method, target (path and query) or body | 422 problem+json |
 * | same key after completion | the stored status, body and allow-listed headers, `Idempotent-Replayed: true` |
 * | the store fails | 503 problem+json, `Retry-After: 1`; the handler does not run |
 * | a full memory store and a new key | 503 problem+json, `Retry-After: 60`; the handler does not run |
 * | no client identity (see `scope`) | 500 problem+json; the handler does not run |
 * | the body was read before the middleware, and its bytes are gone | 500 problem+json `body-consumed`; the handler does not run |
 *
 * **Once started, a handler runs to its end.** The claim is atomic and taken before the handler starts. The
 * handler then runs in a fiber of its own, without the request's deadline: a client that closes its
 * connection, or a deadline that passes, ends only the *wait* for it, never the handler, and its answer is
 * stored for the retry. Behind `LoadShedMiddleware`, such a handler keeps its admission slot until it ends. Until its answer is read and stored, its lease is renewed every `lease / 3`, so
 * another request takes the key over only when the renewals stop: its process died, or the store was
 * unreachable for a whole lease. An answer the store fails to record (it went down after the handler ran) is
 * still sent, and recorded again in the background, at most a second apart (`lease / 4` if shorter), until
 * the store takes it, the key was taken over, or `ttl` has passed. The renewals stop once the answer goes to
 * the store, so the lease runs out one lease after the last renewal that succeeded: a store back at least one
 * such pause (plus one attempt) before then records the answer before a retry may take the key over; a store
 * back later leaves a race with the first retry. At most 1,000 answers wait to be recorded at a time (one more
 * is dropped, with an error log). When `make` runs in a scope (`Layer.unwrap`, `Effect.scoped`), closing
 * it stops the recordings still waiting, with an error log that counts them; without one they run until they
 * end or the process exits. The key is released (a retry runs the handler again) only when the handler
 * failed with a typed error (it reports that it did nothing) or answered a status that is not stored. A
 * defect — in the handler, or while its body is read — is stored as the 500 the server answered (unless
 * `storeServerErrors` is off).
 *
 * **What is stored**: what the handler answered is the answer, errors included (Stripe's rule: it may have
 * had effects), except 429 and 503 (they ask the client to come back), other 5xx when `storeServerErrors` is
 * `false`, and statuses `storeStatus` refuses. A body larger than `maxResponseBytes` (or one that is not
 * bytes, e.g. form data) is answered in full but stored without it: both the answer and its replays say
 * `Idempotent-Replay-Body: omitted`. Completed keys are kept for `ttl` (default 24 hours).
 *
 * **Client scope**: keys belong to a client, by default the address of the connection (see
 * {@link ClientScope}); stores keep only a digest of the scope. Authentication must run before this middleware
 * when the scope comes from the principal.
 *
 * Every decision is counted in `effect_resilience_idempotency_requests_total`, labelled `outcome` (`new`,
 * `replay`, `in_progress`, `mismatch`, `invalid`, `too_large`, `store_error`, `store_full`, `unkeyed`):
 * docs/observability.md.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Redacted } from "effect"
import type { ClientScope, Middleware } from "./ClientScope.js"
import type { IdempotencyStore } from "./IdempotencyStore.js"
import * as internal from "./internal/http/idempotencyMiddleware.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options<R = never> {
  /** Methods the middleware guards. Default `["POST", "PATCH"]`; others pass straight through. */
  readonly methods?: ReadonlyArray<string>
  /** Default `"Idempotency-Key"`. Accepted as a Structured Fields string (`"abc"`) or a bare token. */
  readonly header?: string
  /** When `false`, requests without a key pass through unguarded instead of getting 400. Default `true`. */
  readonly required?: boolean
  /** Default 255. */
  readonly maxKeyLength?: number
  /** Default 1 MiB. Larger bodies get 413 (they are buffered to fingerprint them and hand them to the handler). */
  readonly maxBodyBytes?: number
  /**
   * The largest response body stored for replays; default 64 KiB. A larger one is answered in full but
   * replayed without its body (`Idempotent-Replay-Body: omitted`). Stores hold at most this per key.
   */
  readonly maxResponseBytes?: number
  /** How long completed keys are remembered. Default 24 hours. */
  readonly ttl?: Duration.Input
  /** How long an unrenewed claim is honoured before another request may take it over. Default 60 seconds. */
  readonly lease?: Duration.Input
  /** Store and replay 5xx answers other than 503 (default `true`); `false` releases the key instead. */
  readonly storeServerErrors?: boolean
  /**
   * Which of the handler's statuses are stored, beside the rules above (429 and 503 never are). A status
   * refused here releases the key, so a retry runs the handler again: refuse only statuses your handler
   * answers before doing anything (e.g. a 400 of its own validation). Default: every status.
   */
  readonly storeStatus?: (status: number) => boolean
  /** More response headers to replay, beside the default allow-list (`Set-Cookie` is refused). */
  readonly replayHeaders?: ReadonlyArray<string>
  /**
   * Who the key belongs to, so two clients never share a key. Default: `ClientScope.address()`, the
   * connection's address; behind proxies `ClientScope.address({ trustedProxies })`; with authentication a
   * function that reads the principal (an effect that may require the service your authentication provides).
   */
  readonly scope?: ClientScope<R>
  /**
   * A server secret: stores then keep an HMAC-SHA-256 of each scope instead of a plain SHA-256 (which
   * someone who reads the store could reverse for low-entropy scopes, such as addresses, by trying them all).
   */
  readonly scopeSecret?: Redacted.Redacted<string> | string
}

/**
 * Builds the middleware, taking the {@link IdempotencyStore} **once**: run it where the server is built and
 * provide the store there, so every request shares it (a store provided per request would remember nothing).
 * Run it in the server's scope (`Layer.unwrap`, as below) so the answers still being recorded in the
 * background are stopped, and counted in an error log, when the server is released.
 * Throws `IllegalArgumentError` for invalid options when called.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
 *
 * const createOrder = Effect.succeed(HttpServerResponse.jsonUnsafe({ id: 1 }, { status: 201 }))
 *
 * const OrdersRoute = Layer.unwrap(Effect.gen(function*() {
 *   const idempotent = yield* IdempotencyMiddleware.make({ ttl: "24 hours" })
 *   return HttpRouter.add("POST", "/orders", createOrder.pipe(idempotent))
 * })).pipe(Layer.provide(IdempotencyStore.layerMemory)) // once, for the whole server
 *
 * // serve it with HttpRouter.serve(OrdersRoute) over NodeHttpServer.layer from @effect/platform-node
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: <R = never>(options?: Options<R>) => Effect.Effect<Middleware<R>, never, IdempotencyStore> =
  internal.make

/**
 * The response header set on replays.
 *
 * @since 1.0.0
 * @category constants
 */
export const replayedHeader: typeof internal.replayedHeader = internal.replayedHeader

/**
 * The response header that says a response is (or will be) replayed without its body, with the value
 * `omitted`: it was larger than `maxResponseBytes`, or not bytes.
 *
 * @since 1.0.0
 * @category constants
 */
export const bodyOmittedHeader: string = internal.bodyOmittedHeader

/**
 * The response headers replayed by default, beside the status and the body.
 *
 * @since 1.0.0
 * @category constants
 */
export const defaultReplayHeaders: ReadonlyArray<string> = internal.defaultReplayHeaders
