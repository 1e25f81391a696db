import { Effect } from "effect"
import type { ClientScope } from "effect-resilience"
import { HttpServerRequest, HttpServerResponse } from "effect/http"

/** What {@link serveWeb} answered: status, headers, and the body as text. */
export interface WebAnswer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/**
 * Runs `middleware` around an app answering 200 "ok" on one web `request`, in memory (Effect 3: `HttpApp.Default`
 * over `@effect/platform`; Effect 4: an Effect over `effect/http`).
 */
export const serveWeb = <R>(
  middleware: ClientScope.Middleware<R>,
  request: Request
): Effect.Effect<WebAnswer, unknown, R> =>
  Effect.map(
    Effect.provideService(
      middleware(Effect.succeed(HttpServerResponse.text("ok"))),
      HttpServerRequest.HttpServerRequest,
      HttpServerRequest.fromWeb(request)
    ),
    (response) => ({
      status: response.status,
      headers: response.headers,
      body: response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : ""
    })
  )
