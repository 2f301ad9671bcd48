"""A stand-in for vLLM: a small, real HTTP server that speaks the OpenAI chat-completions
protocol and streams each reply as server-sent events, one token a chunk, at a fixed rate
per stream.

    python -m bench.openai_backend --port 8001 --tokens-per-second 50

It runs in a process of its own, so that the CPU time it takes is never counted as the
app's. Every reply is exactly `max_tokens` long (the request's max_new_tokens), drawn from a
markdown text with code blocks (`scripted_reply.markdown_text`), so that the app's parser and
display do the work a real reply makes them do. It lists one model, named by `--model`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time

READY = "BENCH_BACKEND_READY"
DEFAULT_MODEL = "bench-model"
# Words with the space before them, punctuation and runs of whitespace: about the size of a
# real model's tokens.
TOKEN = re.compile(r"[ \t]*\w+|[ \t]*[^\w\s]|\s+")


def reply_tokens() -> list[str]:
    from .scripted_reply import markdown_text

    return TOKEN.findall(markdown_text(40))


def chunk(completion_id: str, model: str, delta: dict, finish_reason: str | None = None,
          usage: dict | None = None) -> bytes:
    body = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish_reason,
                                          "logprobs": None}]}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def build_app(model: str, tokens_per_second: float):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    tokens = reply_tokens()
    count = 0

    async def models(_request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "bench"}]})

    async def completions(request: Request):
        nonlocal count
        body = await request.json()
        count += 1
        completion_id = f"chatcmpl-{count}"
        length = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": length, "total_tokens": prompt_tokens + length}

        async def events():
            # Paced against the clock, not by sleeping a fixed time per token: the rate stays
            # what was asked however long each send takes.
            started = time.perf_counter()
            yield chunk(completion_id, model, {"role": "assistant", "content": ""})
            for n in range(length):
                delay = started + n / tokens_per_second - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                yield chunk(completion_id, model, {"content": tokens[n % len(tokens)]})
            yield chunk(completion_id, model, {}, finish_reason="length")
            if (body.get("stream_options") or {}).get("include_usage"):
                yield chunk(completion_id, model, {}, usage=usage)
            yield b"data: [DONE]\n\n"

        if not body.get("stream"):
            text = "".join(tokens[n % len(tokens)] for n in range(length))
            return JSONResponse({"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                                 "model": model, "usage": usage,
                                 "choices": [{"index": 0, "finish_reason": "length",
                                              "message": {"role": "assistant", "content": text}}]})
        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/models", models), Route("/v1/chat/completions", completions, methods=["POST"])])


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens-per-second", type=float, default=50.0)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args(argv)
    config = uvicorn.Config(build_app(args.model, args.tokens_per_second), host="127.0.0.1", port=args.port,
                            log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        print(READY, flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
