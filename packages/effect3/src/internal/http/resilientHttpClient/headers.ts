/**
 * The headers an attempt carries for the server's middlewares: the time it has left (`DeadlineMiddleware`) and
 * the fiber's criticality (`LoadShedMiddleware`). Both are set as the request is sent, so an attempt that waited
 * (for a pause, a limiter, a backoff) sends what is left then.
 */
import * as DeadlineHeader from "@effect-resilience/core/deadlineHeader"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { monotonicMillisOf } from "../../clock.js"
import { currentCriticality } from "../../criticality.js"
import { currentDeadline } from "../../deadline.js"
import * as validate from "../../validate.js"
import { currentAttemptEnd } from "./attemptTimeout.js"

export interface HeaderOptions {
  readonly header?: string
}

export const headerName = (option: string, value: unknown): string => {
  if (typeof value !== "string" || value === "") validate.invalid(`ResilientHttpClient ${option} must be a header name`)
  return (value as string).toLowerCase()
}

const optionsOf = (options: HeaderOptions | undefined, name: string): HeaderOptions => {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    validate.invalid(`ResilientHttpClient ${name} options must be an object`)
  }
  return options ?? {}
}

/**
 * `min(end of the attempt, deadline) - now` in whole milliseconds, rounded down (never promise the server more
 * time than the client waits); no header when there is neither.
 */
export const deadlineHeader = (options?: HeaderOptions) => {
  const header = headerName("deadlineHeader", optionsOf(options, "deadlineHeader").header ?? HttpHeaders.requestTimeout)
  return <E, R>(self: HttpClient.HttpClient.With<E, R>): HttpClient.HttpClient.With<E, R> =>
    HttpClient.mapRequestEffect(self, (request) =>
      Effect.withFiberRuntime((fiber) => {
        const now = monotonicMillisOf(fiber)
        const end = fiber.getFiberRef(currentAttemptEnd)
        const value = DeadlineHeader.clientValue(
          end === undefined ? Infinity : end - now,
          fiber.getFiberRef(currentDeadline),
          now
        )
        return Effect.succeed(value === undefined ? request : HttpClientRequest.setHeader(request, header, value))
      }))
}

export const criticalityHeader = (options?: HeaderOptions) => {
  const header = headerName(
    "criticalityHeader",
    optionsOf(options, "criticalityHeader").header ?? HttpHeaders.criticality
  )
  return <E, R>(self: HttpClient.HttpClient.With<E, R>): HttpClient.HttpClient.With<E, R> =>
    HttpClient.mapRequestEffect(
      self,
      (request) =>
        Effect.map(FiberRef.get(currentCriticality), (level) => HttpClientRequest.setHeader(request, header, level))
    )
}
