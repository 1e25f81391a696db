import { HttpClient } from "@effect/platform"
import { Effect } from "effect"
import { scriptedClient as scripted, type Step } from "../support/memoryHttp.js"

/**
 * An `HttpClient` answering in memory, step by step (`Step`: a status, a status with headers, `"refused"`,
 * `"reset"`, `"hang"`; the last step repeats): `{ client }` (Effect 3: `@effect/platform`'s `HttpClient` over
 * `fetch` `Response`s; Effect 4: `effect/http`'s, over responses read synchronously). Both have `client.get(url)`.
 */
export const scriptedHttp = (script: ReadonlyArray<Step>) => Effect.map(scripted(script), ({ client }) => ({ client }))

/** Provides `client` as the `HttpClient` service (Effect 3: `@effect/platform`'s tag; Effect 4: `effect/http`'s). */
export const provideHttpClient =
  (client: HttpClient.HttpClient) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, HttpClient.HttpClient>> =>
    Effect.provideService(self, HttpClient.HttpClient, client)
