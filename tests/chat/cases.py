"""Message lists for chat-template parity: system, multi-turn, assistant prefill, tool calls and results,
reasoning content, enable_thinking on/off, content blocks, awkward characters."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "precision": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
U2 = {"role": "user", "content": "What's 2 + 2?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1a2b3c4d5", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1a2b3c4d5", "name": "get_weather", "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"}
TWO_CALLS = {"role": "assistant", "content": "Let me check both.", "tool_calls": [
    {"id": "call_aaaaaaaa1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "call_bbbbbbbb2", "type": "function", "function": {"name": "search", "arguments": {"query": "Paris events"}}}]}
RESULT2 = {"role": "tool", "tool_call_id": "call_aaaaaaaa1", "name": "get_weather", "content": "sunny"}
RESULT3 = {"role": "tool", "tool_call_id": "call_bbbbbbbb2", "name": "search", "content": "a concert"}


def cases():
    c = []

    def add(name, messages, agp=True, tools=None, **kwargs):
        c.append({"name": name, "messages": messages, "add_generation_prompt": agp, "tools": tools, "kwargs": kwargs})

    add("user_only", [U1])
    add("system_user", [SYS, U1])
    add("multi_turn", [SYS, U1, A1, U2])
    add("multi_turn_no_system", [U1, A1, U2])
    add("assistant_prefill", [U1, A1], agp=False)
    add("no_generation_prompt", [SYS, U1], agp=False)
    add("tools_offered", [SYS, U1], tools=[WEATHER_TOOL, SEARCH_TOOL])
    add("tool_call_and_result", [U1, CALL, RESULT], tools=[WEATHER_TOOL])
    add("tool_round_trip_answer", [SYS, U1, CALL, RESULT, {"role": "assistant", "content": "It is 18°C and cloudy."}, U2],
        tools=[WEATHER_TOOL])
    add("two_tool_calls", [U1, TWO_CALLS, RESULT2, RESULT3], tools=[WEATHER_TOOL, SEARCH_TOOL])
    add("thinking_off", [U1], enable_thinking=False)
    add("thinking_on", [SYS, U1], enable_thinking=True)
    add("reasoning_content", [U1, {"role": "assistant", "content": "4", "reasoning_content": "2 plus 2 is 4."}, U2])
    add("think_in_content", [U1, {"role": "assistant", "content": "<think>\nadding\n</think>\n\nIt is 4."}, U2])
    add("content_blocks", [{"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Briefly."}]}])
    add("awkward_text", [SYS, {"role": "user", "content": "Quotes ' \" and {{ braces }} {% raw %} \\n tabs\t, 中文, émoji 🤖, <|im_start|>"}])
    add("long_conversation", [SYS] + [m for i in range(4) for m in
                                      ({"role": "user", "content": f"Question {i}?"}, {"role": "assistant", "content": f"Answer {i}."})] + [U2])
    add("empty_system", [{"role": "system", "content": ""}, U1])
    return c
