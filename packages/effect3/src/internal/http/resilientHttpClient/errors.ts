import * as HttpClassify from "@effect-resilience/core/httpClassify"
import { HttpClient, type HttpClientError } from "@effect/platform"
import { Data, Duration, Effect } from "effect"
import type * as Api from "../../../ResilientHttpClient.js"
import type { Fields } from "../../errorFields.js"
import { ConnectFailed, NoResponse } from "../httpErrors.js"

export class OriginPaused extends Data.TaggedError("OriginPaused")<Fields<Api.OriginPaused>> {
  override get message(): string {
    return `${this.origin} asked every caller to hold off for ${Duration.format(this.retryAfter)} more, ` +
      "past this call's deadline"
  }
}

export const classifyTransportError = (
  error: HttpClientError.HttpClientError
): HttpClientError.HttpClientError | ConnectFailed | NoResponse => {
  if (error._tag !== "RequestError" || error.reason !== "Transport") return error
  const reason = HttpClassify.connectFailureReason(error.cause)
  return reason !== undefined
    ? new ConnectFailed({ reason, request: error.request, cause: error.cause })
    : new NoResponse({ reason: "reset", request: error.request, cause: error.cause })
}

const isHttpClientError = (u: unknown): u is HttpClientError.HttpClientError =>
  typeof u === "object" && u !== null && ((u as { _tag?: unknown })._tag === "RequestError" ||
    (u as { _tag?: unknown })._tag === "ResponseError")

/** A transport failure of `self` becomes what is known about the request: `ConnectFailed` or `NoResponse`. */
export const classifyTransportErrors = <E, R>(
  self: HttpClient.HttpClient.With<E, R>
): HttpClient.HttpClient.With<E | ConnectFailed | NoResponse, R> =>
  HttpClient.transformResponse(
    self,
    Effect.mapError((error: E) => isHttpClientError(error) ? classifyTransportError(error) as E : error)
  )
