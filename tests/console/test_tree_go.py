"""A level shows at most 500 buckets; one past them is reached by typing its value, as
``--narrow`` reaches it from the command line."""

from __future__ import annotations

from playwright.sync_api import Page

from tests.console.conftest import ConsoleProcess


def test_a_value_past_the_buckets_shown_is_opened_by_name(
    page: Page, console: ConsoleProcess
) -> None:
    page.goto(console.url)  # the login
    # one bucket shown of acme's users (alice, bob): bob is past it
    page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&by=end_user&limit=1")
    assert "more buckets 1" in page.content()
    form = page.locator("form.go", has=page.get_by_label("end_user not shown"))
    form.get_by_label("end_user not shown").fill("bob")
    form.get_by_role("button", name="Open").click()
    page.wait_for_url("**/tree/memory?at=tenant%3Dacme&at=end_user%3Dbob")
    crumbs = page.locator("nav.crumbs").inner_text()
    assert "tenant=acme" in crumbs and "end_user=bob" in crumbs
    assert page.locator("td", has_text="c-bob-0").count() == 1
    page.goto(f"{console.base}/tree/memory?at=tenant%3Dacme&by=end_user")
    assert page.locator("form.go").count() == 0  # every bucket shown: nothing to type
