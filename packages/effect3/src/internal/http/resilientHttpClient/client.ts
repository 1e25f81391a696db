import { HttpClient, type HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Effect } from "effect"

type Client<E, R> = HttpClient.HttpClient.With<E, R>
type Execute<E, R> = (
  request: HttpClientRequest.HttpClientRequest
) => Effect.Effect<HttpClientResponse.HttpClientResponse, E, R>

const isClient = (u: unknown): u is Client<unknown, unknown> =>
  typeof u === "object" && u !== null && HttpClient.TypeId in u

/**
 * A client that runs `f` around each execution of `self`. `f` calls `self.execute` itself, so what `self` does
 * to a request before sending it (its `mapRequest`s, the headers set per attempt) runs inside `f`, once per
 * attempt — unlike `HttpClient.transform`, whose request is prepared once, outside.
 */
export const around = <E, R, E1, R1>(
  self: Client<E, R>,
  f: (request: HttpClientRequest.HttpClientRequest, execute: Execute<E, R>) => Effect.Effect<
    HttpClientResponse.HttpClientResponse,
    E1,
    R1
  >
): Client<E1, R1> =>
  HttpClient.makeWith(
    (request: Effect.Effect<HttpClientRequest.HttpClientRequest>) => Effect.flatMap(request, (r) => f(r, self.execute)),
    Effect.succeed
  )

/**
 * Both forms of a combinator that takes one argument, `combinator(self, argument)` and
 * `self.pipe(combinator(argument))`. `compile` checks the argument once and returns the function over clients.
 */
export const dualClient = (compile: (argument: any) => (self: any) => any): any =>
  function(self: unknown, argument?: unknown) {
    return isClient(self) ? compile(argument)(self) : compile(self)
  }

/** The origin (scheme, host and port) a request goes to; one key for relative URLs, which one base resolves. */
export const originOf = (url: string): string => {
  try {
    return new URL(url).origin
  } catch {
    return ""
  }
}
