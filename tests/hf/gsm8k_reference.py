#!/usr/bin/env python3
"""verl's GSM8K preprocessing (examples/data_preprocess/gsm8k.py: extract_solution, make_map_fn),
written here from its definition with the standard library only, as the reference for
rlflow_prepare_gsm8k.

  gsm8k_reference.py IN.jsonl OUT.jsonl SPLIT

IN: one {"question", "answer"} object per line; OUT: one verl RL row per line (json.dumps).
A row whose answer has no '#### <number>' exits with status 2 (verl asserts).
"""
import json
import re
import sys

INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def extract_solution(solution_str):
    solution = re.search("#### (\\-?[0-9\\.\\,]+)", solution_str)
    if solution is None:
        sys.exit(2)
    final_solution = solution.group(0)
    return final_solution.split("#### ")[1].replace(",", "")


def main():
    src, dst, split = sys.argv[1], sys.argv[2], sys.argv[3]
    out = []
    with open(src, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            example = json.loads(line)
            question_raw = example.pop("question")
            question = question_raw + " " + INSTRUCTION
            answer_raw = example.pop("answer")
            solution = extract_solution(answer_raw)
            out.append({
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": question}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": solution},
                "extra_info": {"split": split, "index": len(out), "answer": answer_raw, "question": question_raw},
            })
    with open(dst, "w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
