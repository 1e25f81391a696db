/**
 * Server middleware that makes `POST` (and `PATCH`) safe to retry: the first request with an
 * `Idempotency-Key` runs; every later request with the same key gets the stored response back instead
 * of running again. Semantics follow the IETF Idempotency-Key draft (-07) and Stripe's documented behaviour:
 *
 * | situation | answer |
 * |---|---|
 * | key missing, empty, longer than `maxKeyLength` or not printable ASCII | 400 problem+json |
 * | body larger than `maxBodyBytes` | 413 problem+json |
 * | first request with the key | the handler runs; its response is stored |
 * | same key while the first is still running | 409 problem+json, `Retry-After: 1` |
 * | same key, different method/path/body | 422 problem+json |
 * | same key after completion | the stored status, body, content-type and location, `Idempotent-Replayed: true` |
 * | the store fails | 503 problem+json, `Retry-After: 1`; the handler does not run |
 *
 * The claim is atomic and happens **before** the handler runs. If the handler dies or is interrupted the
 * claim is released, so a retry runs again. 5xx responses are stored and replayed by default (Stripe's
 * choice); `storeServerErrors: false` releases the key instead. Completed keys are kept for `ttl`
 * (default 24 hours). A claim whose process crashed is taken over once its lease (default 60 s) runs out;
 * a live handler renews its lease every `lease / 3`, so only dead owners lose their claims.
 *
 * @since 0.1.0
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerRequest } from "@effect/platform"
import type { Duration } from "effect"
import type { IdempotencyStore } from "../IdempotencyStore.js"
import * as internal from "../internal/idempotencyMiddleware.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Methods the middleware guards. Default `["POST", "PATCH"]`; others pass straight through. */
  readonly methods?: ReadonlyArray<string>
  /** Default `"Idempotency-Key"`. Accepted as a Structured Fields string (`"abc"`) or a bare token. */
  readonly header?: string
  /** When `false`, requests without a key pass through unguarded instead of getting 400. Default `true`. */
  readonly required?: boolean
  /** Default 255. */
  readonly maxKeyLength?: number
  /** Default 1 MiB. Larger bodies get 413 (they are buffered to fingerprint and replay them). */
  readonly maxBodyBytes?: number
  /** How long completed keys are remembered. Default 24 hours. */
  readonly ttl?: Duration.DurationInput
  /** How long an unrenewed claim is honoured before another request may take it over. Default 60 seconds. */
  readonly lease?: Duration.DurationInput
  /** Store and replay 5xx responses (default `true`); `false` releases the key so a retry runs again. */
  readonly storeServerErrors?: boolean
  /**
   * Who the key belongs to, so two clients can never collide. Default: the `X-Api-Key` header, else the
   * remote address.
   */
  readonly scope?: (request: HttpServerRequest.HttpServerRequest) => string
}

/**
 * Builds the middleware. Throws `IllegalArgumentException` for invalid options.
 *
 * @example
 * ```ts
 * import { HttpRouter, HttpServerResponse } from "@effect/platform"
 * import { Layer } from "effect"
 * import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
 *
 * const router = HttpRouter.empty.pipe(
 *   HttpRouter.post("/orders", HttpServerResponse.json({ id: 1 }, { status: 201 }))
 * )
 *
 * const app = router.pipe(IdempotencyMiddleware.make({ ttl: "24 hours" }))
 * const store = IdempotencyStore.layerMemory // or a SQL / Redis store shared by many processes
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Options
) => <E, R>(
  app: HttpApp.Default<E, R>
) => HttpApp.Default<E, R | IdempotencyStore | HttpServerRequest.HttpServerRequest> = internal.make

/**
 * The response header set on replays.
 *
 * @since 0.1.0
 * @category constants
 */
export const replayedHeader = "idempotent-replayed"
