"""A tiny greeter: the code the sample plans prove."""


def greeting(name: str) -> str:
    return f"Hello, {name}!"


if __name__ == "__main__":
    print(greeting("world"))
